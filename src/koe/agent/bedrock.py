"""Amazon Bedrock's ``ConverseStream`` through boto3: any Bedrock chat model, streamed.

boto3 is blocking, so each stream's event iterator runs in a thread (:mod:`koe.agent.threaded`); closing
the async iterator stops reading and closes the HTTP response. Credentials and region come from boto3's
usual chain (environment, profile, instance role) unless given.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncGenerator, Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from koe.agent.base import Message, missing_extra
from koe.agent.threaded import iterate_in_thread
from koe.errors import UpstreamError


@dataclass(frozen=True, slots=True)
class BedrockOptions:
    """Which model, where, and how long an answer may be.

    Attributes:
        model_id: a Bedrock model or inference-profile id, e.g. ``us.amazon.nova-lite-v1:0``.
        region: AWS region; ``None`` uses boto3's default (``AWS_REGION``, profile...).
        max_tokens: the answer's length limit.
        temperature: sampling temperature.
        max_streams: concurrent streams (threads) this source runs at most.
    """

    model_id: str
    region: str | None = None
    max_tokens: int = 200
    temperature: float = 0.7
    max_streams: int = 8


def converse_request(options: BedrockOptions, messages: Sequence[Message]) -> dict[str, Any]:
    """The ``converse_stream`` arguments for ``messages``.

    Converse takes system prompts apart and wants user and assistant turns to alternate, starting with
    the user, so consecutive messages of one role are joined and a leading assistant turn is dropped.
    """
    system = [{"text": m.content} for m in messages if m.role == "system"]
    turns: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system" or (not turns and m.role == "assistant"):
            continue
        if turns and turns[-1]["role"] == m.role:
            turns[-1]["content"][0]["text"] += "\n" + m.content
        else:
            turns.append({"role": m.role, "content": [{"text": m.content}]})
    request: dict[str, Any] = {
        "modelId": options.model_id,
        "messages": turns,
        "inferenceConfig": {"maxTokens": options.max_tokens, "temperature": options.temperature},
    }
    if system:
        request["system"] = system
    return request


class BedrockSource:
    """Streams ``contentBlockDelta`` text from ``ConverseStream``.

    Args:
        options: model, region, limits.
        client: a ``bedrock-runtime`` boto3 client (default: one built from ``options.region``).
    """

    simulated = False

    def __init__(self, options: BedrockOptions, client: Any = None) -> None:
        if client is None:
            try:
                import boto3
            except ImportError as exc:
                raise missing_extra("boto3", "bedrock") from exc
            client = boto3.client("bedrock-runtime", region_name=options.region)
        self._client = client
        self._options = options
        self._executor = ThreadPoolExecutor(max_workers=options.max_streams, thread_name_prefix="koe-bedrock")
        self.label = f"bedrock: {options.model_id} in {client.meta.region_name}"

    def stream(self, messages: Sequence[Message]) -> AsyncGenerator[str]:
        """Yield the answer's text deltas; closing the iterator closes the event stream.

        Raises:
            UpstreamError: the call or the stream failed (throttling, access denied, no credentials...).
        """
        request = converse_request(self._options, messages)
        return iterate_in_thread(lambda stop: self._deltas(request, stop), self._executor)

    async def aclose(self) -> None:
        """Stop the stream threads (a running one ends at its next event)."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _deltas(self, request: dict[str, Any], stop: threading.Event) -> Generator[str]:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            events = self._client.converse_stream(**request)["stream"]
            try:
                for event in events:
                    if stop.is_set():
                        return
                    text = event.get("contentBlockDelta", {}).get("delta", {}).get("text")
                    if text:
                        yield text
            finally:
                events.close()
        except ClientError as exc:
            error = exc.response.get("Error", {})
            raise UpstreamError(
                f"{self.label}: {error.get('Code', 'error')}: {error.get('Message', exc)}"
            ) from exc
        except BotoCoreError as exc:
            raise UpstreamError(f"{self.label}: {exc}") from exc
