"""The Bedrock ConverseStream source, offline: a real boto3 client whose HTTP reply is event-stream bytes.

There is no AWS account here. botocore's ``before-send`` hook hands back a response whose body holds
messages in the ``application/vnd.amazon.eventstream`` binary format, encoded below; everything else —
request serialization and signing, event-stream parsing, error mapping — is botocore's own code.
"""

from __future__ import annotations

import asyncio
import binascii
import json
import struct
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse

from koe.agent.base import Message
from koe.agent.bedrock import BedrockOptions, BedrockSource, converse_request
from koe.errors import UpstreamError

_STRING = 7  # event-stream header value type


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return (
        bytes([len(raw_name)]) + raw_name + bytes([_STRING]) + struct.pack(">H", len(raw_value)) + raw_value
    )


def eventstream_message(headers: dict[str, str], payload: dict[str, Any]) -> bytes:
    """One message of the event-stream wire format: prelude, its CRC, headers, payload, message CRC."""
    head = b"".join(_header(k, v) for k, v in headers.items())
    body = json.dumps(payload).encode()
    prelude = struct.pack(">II", 12 + len(head) + len(body) + 4, len(head))
    prelude += struct.pack(">I", binascii.crc32(prelude))
    message = prelude + head + body
    return message + struct.pack(">I", binascii.crc32(message))


def event(kind: str, payload: dict[str, Any]) -> bytes:
    return eventstream_message(
        {":message-type": "event", ":event-type": kind, ":content-type": "application/json"}, payload
    )


class _Body:
    """The raw HTTP body botocore reads an event stream from (``stream()`` chunks, ``close()``)."""

    def __init__(self, data: bytes, chunk: int = 7) -> None:
        self._data = data
        self._chunk = chunk
        self.closed = False

    def stream(self, **_: Any) -> Iterator[bytes]:
        for i in range(0, len(self._data), self._chunk):  # split mid-message, as a network would
            yield self._data[i : i + self._chunk]

    def close(self) -> None:
        self.closed = True


def bedrock_client(body: bytes, sent: list[dict[str, Any]]) -> tuple[Any, _Body]:
    client = boto3.client(
        "bedrock-runtime", region_name="eu-west-1", aws_access_key_id="test", aws_secret_access_key="test"
    )
    raw = _Body(body)

    def reply(request: Any, **_: Any) -> AWSResponse:
        sent.append({"url": request.url, "body": json.loads(request.body), "headers": dict(request.headers)})
        return AWSResponse(request.url, 200, {"content-type": "application/vnd.amazon.eventstream"}, raw)

    client.meta.events.register("before-send.bedrock-runtime.ConverseStream", reply)
    return client, raw


CONVERSATION = [
    Message("system", "Be brief."),
    Message("user", "Hi"),
    Message("assistant", "Hello!"),
    Message("user", "Name a colour."),
]


def collect(source: BedrockSource, messages: list[Message]) -> list[str]:
    async def main() -> list[str]:
        return [delta async for delta in source.stream(messages)]

    return asyncio.run(main())


def test_the_request_is_a_signed_converse_stream_call_with_system_apart() -> None:
    sent: list[dict[str, Any]] = []
    stream = event("messageStart", {"role": "assistant"}) + event("messageStop", {"stopReason": "end_turn"})
    client, _ = bedrock_client(stream, sent)
    collect(BedrockSource(BedrockOptions("amazon.nova-lite-v1:0", max_tokens=50), client), CONVERSATION)
    (request,) = sent
    assert request["url"] == (
        "https://bedrock-runtime.eu-west-1.amazonaws.com/model/amazon.nova-lite-v1%3A0/converse-stream"
    )
    assert request["headers"]["Authorization"].startswith(b"AWS4-HMAC-SHA256")
    assert request["body"] == {
        "messages": [
            {"role": "user", "content": [{"text": "Hi"}]},
            {"role": "assistant", "content": [{"text": "Hello!"}]},
            {"role": "user", "content": [{"text": "Name a colour."}]},
        ],
        "system": [{"text": "Be brief."}],
        "inferenceConfig": {"maxTokens": 50, "temperature": 0.7},
    }


def test_converse_wants_alternating_turns_starting_with_the_user() -> None:
    request = converse_request(
        BedrockOptions("m"),
        [Message("assistant", "Hi!"), Message("user", "a"), Message("user", "b"), Message("assistant", "c")],
    )
    assert request["messages"] == [
        {"role": "user", "content": [{"text": "a\nb"}]},
        {"role": "assistant", "content": [{"text": "c"}]},
    ]
    assert "system" not in request


def test_text_deltas_are_streamed_in_order_and_the_body_is_closed() -> None:
    stream = (
        event("messageStart", {"role": "assistant"})
        + event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Blue "}})
        + event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "is calm."}})
        + event("contentBlockStop", {"contentBlockIndex": 0})
        + event("messageStop", {"stopReason": "end_turn"})
        + event(
            "metadata",
            {
                "usage": {"inputTokens": 9, "outputTokens": 4, "totalTokens": 13},
                "metrics": {"latencyMs": 120},
            },
        )
    )
    client, raw = bedrock_client(stream, [])
    assert collect(BedrockSource(BedrockOptions("m"), client), CONVERSATION) == ["Blue ", "is calm."]
    assert raw.closed


def test_an_exception_event_mid_stream_becomes_an_upstream_error() -> None:
    stream = event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Partial"}}) + (
        eventstream_message(
            {
                ":message-type": "exception",
                ":exception-type": "throttlingException",
                ":content-type": "application/json",
            },
            {"message": "Too many tokens, please wait."},
        )
    )
    client, _ = bedrock_client(stream, [])
    source = BedrockSource(BedrockOptions("m"), client)
    received: list[str] = []

    async def main() -> None:
        async for delta in source.stream(CONVERSATION):
            received.append(delta)

    with pytest.raises(UpstreamError, match="throttlingException: Too many tokens"):
        asyncio.run(main())
    assert received == ["Partial"]
