"""The API key and CORS against a live server with a key set, real httpx, openai and websockets clients."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from koe.errors import ConfigError
from koe.server.access import warn_if_exposed
from koe.settings import Settings
from live_server import LiveServer, ServerFactory
from ws_events import of_type, receive, run, send, until

KEY = "koe-test-key-0123456789abcdef"
ORIGIN = "https://app.example.com"
BEARER = {"Authorization": f"Bearer {KEY}"}
#: Every route that reveals or synthesizes something: (method, path, body).
GUARDED = [
    ("GET", "/metrics", None),
    ("GET", "/v1/models", None),
    ("GET", "/v1/audio/voices", None),
    ("GET", "/agent/info", None),
    ("POST", "/invocations", {"text": "Hi."}),
    ("POST", "/v1/audio/speech", {"model": "tts-1", "input": "Hi.", "voice": "alloy"}),
    ("POST", "/agent/invocations", {"read": "Hi."}),
    ("GET", "/no/such/route", None),
]


@pytest.fixture(scope="module")
def guarded(serve_fake: ServerFactory) -> Iterator[LiveServer]:
    """A server with an API key and one allowed origin (it became ready: ``/ping`` answered without a key)."""
    with serve_fake(api_key=KEY, cors_origins=(ORIGIN,)) as live:
        yield live


# --- HTTP ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/ping", "/agent/ping", "/", "/index.html", "/app.js", "/player-worklet.js"]
)
def test_health_checks_and_the_page_answer_without_a_key(guarded: LiveServer, path: str) -> None:
    assert httpx.get(guarded.http_url + path).status_code == 200


@pytest.mark.parametrize(("method", "path", "body"), GUARDED)
@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong-key-0123456789abcdef"}, {"Authorization": KEY}, {"X-Api-Key": KEY}],
    ids=["none", "wrong", "no-scheme", "x-api-key-is-for-websockets"],
)
def test_other_routes_refuse_a_missing_or_wrong_key_with_401(
    guarded: LiveServer, method: str, path: str, body: Any, headers: dict[str, str]
) -> None:
    response = httpx.request(method, guarded.http_url + path, json=body, headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer realm="koe"'
    payload = response.json()
    error = payload["error"] if path.startswith("/v1/") else payload  # OpenAI's shape on /v1/
    assert error["code" if path.startswith("/v1/") else "error"] == "unauthorized"
    assert "Authorization: Bearer <key>" in error["message"]
    assert "Traceback" not in response.text


def test_the_bearer_key_opens_the_http_routes(guarded: LiveServer) -> None:
    response = httpx.post(
        guarded.http_url + "/invocations", json={"text": "Hi.", "stream": False}, headers=BEARER, timeout=120
    )
    assert response.status_code == 200
    assert response.headers["content-type"] == "audio/wav" and len(response.content) > 1000
    assert httpx.get(guarded.http_url + "/agent/info", headers=BEARER).json()["sample_rate"] == 24000


def test_the_openai_sdk_sends_its_api_key_as_the_bearer_token(guarded: LiveServer) -> None:
    good = openai.OpenAI(api_key=KEY, base_url=guarded.http_url + "/v1")
    assert "tts-1" in {model.id for model in good.models.list()}
    bad = openai.OpenAI(
        api_key="not-the-key-0123456789abcdef", base_url=guarded.http_url + "/v1", max_retries=0
    )
    with pytest.raises(openai.AuthenticationError) as refused:
        bad.models.list()
    assert refused.value.code == "unauthorized"


def test_refusals_are_counted_in_the_metrics(guarded: LiveServer) -> None:
    httpx.get(guarded.http_url + "/v1/models")
    metrics = httpx.get(guarded.http_url + "/metrics", headers=BEARER).text
    (line,) = [m for m in metrics.splitlines() if m.startswith('koe_errors_total{code="unauthorized"}')]
    assert float(line.split()[-1]) >= 1


def test_without_a_key_set_nothing_asks_for_one(fake_server: LiveServer) -> None:
    assert httpx.get(fake_server.http_url + "/v1/models").status_code == 200


# --- WebSocket ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "headers"),
    [
        ("", {}),
        ("?api_key=wrong-key-0123456789abcdef", {}),
        ("", {"X-Api-Key": "wrong-key-0123456789abcdef"}),
    ],
    ids=["none", "wrong-query", "wrong-header"],
)
@pytest.mark.parametrize("path", ["/v1/stream", "/agent/ws"])
def test_a_websocket_without_the_key_is_told_why_and_closed_1008(
    guarded: LiveServer, path: str, query: str, headers: dict[str, str]
) -> None:
    async def main() -> None:
        async with connect(guarded.ws_url + path + query, additional_headers=headers) as ws:
            error = await receive(ws)
            assert isinstance(error, dict)
            assert (error["type"], error["code"]) == ("error", "unauthorized")
            assert "?api_key=<key>" in error["message"]
            with pytest.raises(ConnectionClosed) as closed:
                await receive(ws)
        assert closed.value.rcvd is not None
        assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1008, "unauthorized")

    run(main)


@pytest.mark.parametrize(
    ("query", "headers"),
    [("", BEARER), ("", {"X-Api-Key": KEY}), (f"?voice=af_bella&api_key={KEY}", {})],
    ids=["bearer", "x-api-key", "query"],
)
def test_each_form_of_the_key_opens_a_websocket(
    guarded: LiveServer, query: str, headers: dict[str, str]
) -> None:
    async def main() -> None:
        async with connect(
            guarded.ws_url + "/invocations-bidirectional-stream" + query, additional_headers=headers
        ) as ws:
            await send(ws, {"type": "config"})
            (ack,) = await until(ws, of_type("config"))
            assert isinstance(ack, dict) and ack["session"]

    run(main)


def test_deepgrams_token_scheme_opens_http_and_websocket_routes(guarded: LiveServer) -> None:
    token = {"Authorization": f"Token {KEY}"}
    response = httpx.post(
        guarded.http_url + "/v1/speak?encoding=linear16&container=none", json={"text": "Hi."}, headers=token
    )
    assert response.status_code == 200 and response.content

    async def main() -> None:
        async with connect(guarded.ws_url + "/v1/speak?encoding=linear16", additional_headers=token) as ws:
            await send(ws, {"type": "Speak", "text": "Hi."})
            await send(ws, {"type": "Flush"})
            assert (await until(ws, of_type("Flushed")))[-1] == {"type": "Flushed", "sequence_id": 0}

    run(main)


@pytest.mark.parametrize("scheme", ["token", "bearer"])
def test_a_browsers_subprotocol_pair_opens_a_websocket_and_is_answered(
    guarded: LiveServer, scheme: str
) -> None:
    """``new WebSocket(url, ["token", key])``: the browser fails the connection unless the server picks a
    subprotocol it offered, so koe answers ``token``."""

    async def main() -> None:
        async with connect(guarded.ws_url + "/v1/speak", subprotocols=[scheme, KEY]) as ws:  # type: ignore[list-item]
            assert ws.subprotocol == scheme
            await send(ws, {"type": "Speak", "text": "Hi."})
            await send(ws, {"type": "Flush"})
            assert (await until(ws, of_type("Flushed")))[-1]["type"] == "Flushed"

    run(main)


@pytest.mark.parametrize(
    ("headers", "subprotocols", "says"),
    [
        (
            {"Authorization": "Token wrong-key-0123456789abcdef"},
            None,
            "got a key as Authorization: Token that",
        ),
        ({"Authorization": "Bearer wrong-key-0123456789abcdef"}, None, "got a key as Authorization: Bearer"),
        ({}, ["token", "wrong-key-0123456789abcdef"], "got a key as the subprotocol pair 'token, <key>'"),
        ({"Authorization": "Basic dXNlcjpwYXNz"}, None, "an Authorization header in the 'Basic' scheme"),
        ({"X-Api-Key": "wrong", "Authorization": "Token x"}, None, "Authorization: Token and X-Api-Key"),
        ({}, None, "got none"),
    ],
)
def test_a_refused_websocket_is_told_what_arrived(
    guarded: LiveServer, headers: dict[str, str], subprotocols: list[str] | None, says: str
) -> None:
    async def main() -> None:
        url = guarded.ws_url + "/v1/stream"
        async with connect(url, additional_headers=headers, subprotocols=subprotocols) as ws:  # type: ignore[arg-type]
            if subprotocols:
                assert ws.subprotocol == "token"  # so that a browser can read why
            error = await receive(ws)
        assert isinstance(error, dict) and error["code"] == "unauthorized"
        assert says in error["message"]

    run(main)


@pytest.mark.parametrize(
    ("headers", "says"),
    [
        (
            {"Authorization": "Token wrong-key-0123456789abcdef"},
            "got a key as Authorization: Token that does",
        ),
        ({"Authorization": "Basic dXNlcjpwYXNz"}, "in the 'Basic' scheme"),
        ({}, "got none"),
    ],
)
def test_a_refused_request_is_told_what_arrived(
    guarded: LiveServer, headers: dict[str, str], says: str
) -> None:
    response = httpx.post(guarded.http_url + "/invocations", json={"text": "Hi."}, headers=headers)
    assert response.status_code == 401 and says in response.json()["message"]


def test_the_pages_agent_socket_takes_the_key_in_its_query(guarded: LiveServer) -> None:
    async def main() -> None:
        async with connect(f"{guarded.ws_url}/agent/ws?api_key={KEY}") as ws:
            opened = await receive(ws)
            assert isinstance(opened, dict) and opened["type"] == "session"

    run(main)


# --- CORS --------------------------------------------------------------------------------------------------


def test_a_preflight_from_an_allowed_origin_passes_without_the_key(guarded: LiveServer) -> None:
    response = httpx.options(
        guarded.http_url + "/v1/audio/speech",
        headers={
            "Origin": ORIGIN,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type",
        },
    )
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == ORIGIN
    assert "authorization" in response.headers["access-control-allow-headers"].lower()


def test_a_preflight_from_another_origin_is_refused(guarded: LiveServer) -> None:
    response = httpx.options(
        guarded.http_url + "/v1/audio/speech",
        headers={"Origin": "https://evil.example.net", "Access-Control-Request-Method": "POST"},
    )
    assert response.status_code == 400
    assert "access-control-allow-origin" not in response.headers


def test_responses_and_refusals_carry_cors_headers_for_the_allowed_origin(guarded: LiveServer) -> None:
    ok = httpx.get(guarded.http_url + "/v1/models", headers={"Origin": ORIGIN, **BEARER})
    refused = httpx.get(guarded.http_url + "/v1/models", headers={"Origin": ORIGIN})
    assert (ok.status_code, refused.status_code) == (200, 401)
    for response in (ok, refused):  # a page can read why it was refused
        assert response.headers["access-control-allow-origin"] == ORIGIN
    assert "x-rtf" in ok.headers["access-control-expose-headers"].lower()


def test_cors_is_off_by_default(fake_server: LiveServer) -> None:
    response = httpx.get(fake_server.http_url + "/v1/models", headers={"Origin": ORIGIN})
    assert response.status_code == 200
    assert "access-control-allow-origin" not in response.headers


# --- settings and the exposure warning ------------------------------------------------------------------


def test_key_and_origins_come_from_the_environment_and_the_key_stays_out_of_repr() -> None:
    settings = Settings.from_env({"KOE_API_KEY": KEY, "KOE_CORS_ORIGINS": f"{ORIGIN}, http://localhost:3000"})
    assert settings.api_key == KEY
    assert settings.cors_origins == (ORIGIN, "http://localhost:3000")
    assert KEY not in repr(settings)
    assert Settings.from_env({"KOE_API_KEY": ""}).api_key is None  # an empty variable means no key


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("KOE_API_KEY", "short"),
        ("KOE_API_KEY", "a key with spaces in it 0123"),
        ("KOE_API_KEY", "ключ-ключ-ключ-ключ-ключ"),
        ("KOE_CORS_ORIGINS", "app.example.com"),
    ],
)
def test_a_weak_key_or_a_malformed_origin_stops_the_server_at_start(variable: str, value: str) -> None:
    with pytest.raises(ConfigError, match=variable.removeprefix("KOE_").lower()):
        Settings.from_env({variable: value})


@pytest.mark.parametrize(
    ("overrides", "warns"),
    [
        ({"host": "0.0.0.0"}, True),
        ({"host": "::"}, True),
        ({"host": "tts.internal"}, True),
        ({"host": "0.0.0.0", "api_key": KEY}, False),
        ({"host": "0.0.0.0", "allow_unauthenticated": True}, False),
        ({"host": "127.0.0.1"}, False),
        ({"host": "::1"}, False),
        ({"host": "localhost"}, False),
    ],
)
def test_serving_beyond_loopback_without_a_key_is_warned_about(
    caplog: pytest.LogCaptureFixture, overrides: dict[str, Any], warns: bool
) -> None:
    with caplog.at_level(logging.WARNING, logger="koe.server.access"):
        assert warn_if_exposed(Settings(**overrides)) is warns
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == int(warns)
    if warns:
        assert "KOE_API_KEY" in warnings[0] and "SageMaker" in warnings[0]
        assert "KOE_ALLOW_UNAUTHENTICATED" in warnings[0]
