"""Pages of other sites cannot use a server in the user's browser, and names that are not the server's
(DNS rebinding) are refused when it listens on loopback; settings open both up."""

from __future__ import annotations

import base64
import os
import socket
from collections.abc import Iterator

import httpx
import pytest

from live_checks import metric
from live_server import LOOPBACK, LiveServer, ServerFactory
from ws_events import WAIT_S

FOREIGN = "https://evil.example.net"
APP = "https://app.example.com"


@pytest.fixture(scope="module")
def opened(serve_fake: ServerFactory) -> Iterator[LiveServer]:
    """A server that lets one other origin and one other name in."""
    with serve_fake(cors_origins=(APP,), allowed_hosts=("koe.internal",)) as live:
        yield live


def upgrade_status(live: LiveServer, path: str, headers: dict[str, str]) -> tuple[int, bytes]:
    """The status of a WebSocket upgrade (101 when accepted) and the body of a refusal, from a handshake
    written by hand (a client library would not send a Host of our choosing)."""
    fields = {"Host": f"{LOOPBACK}:{live.port}", **headers}
    head = "".join(f"{name}: {value}\r\n" for name, value in fields.items())
    key = base64.b64encode(os.urandom(16)).decode()
    request = (
        f"GET {path} HTTP/1.1\r\n{head}Upgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    with socket.create_connection((LOOPBACK, live.port), timeout=WAIT_S) as sock:
        sock.sendall(request.encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += sock.recv(65536)
        head_bytes, _, body = answer.partition(b"\r\n\r\n")
        status = int(head_bytes.split()[1])
        lengths = [
            line.split(b":")[1]
            for line in head_bytes.lower().split(b"\r\n")
            if line.startswith(b"content-length")
        ]
        while lengths and len(body) < int(lengths[0]):
            body += sock.recv(65536)
        return status, body


@pytest.mark.parametrize(
    "path", ["/v1/stream", "/invocations-bidirectional-stream", "/v1/speak", "/agent/ws"]
)
def test_a_websocket_from_another_sites_page_is_refused_before_it_opens(
    fake_server: LiveServer, path: str
) -> None:
    status, body = upgrade_status(fake_server, path, {"Origin": FOREIGN})
    assert status == 403 and b'"forbidden_origin"' in body and FOREIGN.encode() in body


@pytest.mark.parametrize(
    "origin",
    ["own", "http://localhost:3000", "http://127.0.0.1:5173", "http://[::1]:8000"],
)
def test_the_servers_own_page_and_pages_on_this_machine_may_open_websockets(
    fake_server: LiveServer, origin: str
) -> None:
    if origin == "own":
        origin = fake_server.http_url
    assert upgrade_status(fake_server, "/v1/stream", {"Origin": origin})[0] == 101


def test_clients_that_are_not_browsers_send_no_origin_and_are_served(fake_server: LiveServer) -> None:
    assert upgrade_status(fake_server, "/v1/stream", {})[0] == 101


def test_a_post_from_another_sites_page_is_refused_and_reads_are_not(fake_server: LiveServer) -> None:
    before = metric(fake_server, 'koe_errors_total{code="forbidden_origin"}')
    post = httpx.post(
        fake_server.http_url + "/invocations",
        content=b"Say this for the other site.",
        headers={"Origin": FOREIGN, "Content-Type": "text/plain"},  # a "simple" request: no preflight
    )
    assert (post.status_code, post.json()["error"]) == (403, "forbidden_origin")
    assert metric(fake_server, 'koe_errors_total{code="forbidden_origin"}') == before + 1
    assert httpx.get(fake_server.http_url + "/v1/models", headers={"Origin": FOREIGN}).status_code == 200


@pytest.mark.parametrize(
    "host", ["evil.example.net", "evil.example.net:8080", "192.168.1.5", "localhost.evil"]
)
def test_a_foreign_host_is_refused_on_loopback(fake_server: LiveServer, host: str) -> None:
    response = httpx.get(fake_server.http_url + "/ping", headers={"Host": host})
    assert (response.status_code, response.json()["error"]) == (403, "forbidden_host")
    assert upgrade_status(fake_server, "/v1/stream", {"Host": host})[0] == 403


@pytest.mark.parametrize("host", ["localhost", "localhost:8080", "127.0.0.1", "127.0.0.2:1", "[::1]:8080"])
def test_loopback_names_are_served(fake_server: LiveServer, host: str) -> None:
    assert httpx.get(fake_server.http_url + "/ping", headers={"Host": host}).status_code == 200


def test_settings_open_up_an_origin_and_a_host(opened: LiveServer) -> None:
    assert upgrade_status(opened, "/v1/stream", {"Origin": APP})[0] == 101
    assert upgrade_status(opened, "/agent/ws", {"Origin": APP})[0] == 101
    assert upgrade_status(opened, "/v1/stream", {"Origin": FOREIGN})[0] == 403
    assert httpx.get(opened.http_url + "/ping", headers={"Host": "koe.internal:8080"}).status_code == 200
    assert httpx.get(opened.http_url + "/ping", headers={"Host": "other.internal"}).status_code == 403


def test_any_origin_and_host_when_asked(serve_fake: ServerFactory) -> None:
    with serve_fake(cors_origins=("*",), allowed_hosts=("*",)) as live:
        assert upgrade_status(live, "/v1/stream", {"Origin": FOREIGN, "Host": "evil.example.net"})[0] == 101
