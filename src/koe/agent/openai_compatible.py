"""Any OpenAI-compatible chat-completions server, streamed: OpenAI, vLLM, Ollama, llama.cpp, LM Studio...

Uses the official ``openai`` SDK. Closing the stream closes the HTTP response, which is how these servers
learn to stop generating.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from koe.agent.base import Message, missing_extra
from koe.errors import UpstreamError

if TYPE_CHECKING:
    from openai import AsyncOpenAI

#: Servers that need no key (vLLM, Ollama, llama.cpp) still make the SDK want one.
_PLACEHOLDER_KEY = "not-needed"


@dataclass(frozen=True, slots=True)
class OpenAIOptions:
    """Where and what to ask.

    Attributes:
        base_url: the API root, e.g. ``http://127.0.0.1:11434/v1``; ``None`` is the SDK's default
            (``OPENAI_BASE_URL`` or OpenAI itself).
        model: the model name the server knows.
        api_key: ``None`` reads ``OPENAI_API_KEY``; servers without auth accept anything.
        max_tokens: the answer's length limit (a voice answer should be short).
        temperature: sampling temperature.
        timeout_s: connect/read timeout of each request.
    """

    model: str
    base_url: str | None = None
    api_key: str | None = None
    max_tokens: int = 200
    temperature: float = 0.7
    timeout_s: float = 30.0


class OpenAICompatibleSource:
    """Chat completions with ``stream=True``; yields each chunk's ``delta.content``."""

    simulated = False

    def __init__(self, options: OpenAIOptions, client: AsyncOpenAI | None = None) -> None:
        try:
            from openai import AsyncOpenAI
        except ImportError as exc:
            raise missing_extra("openai", "openai") from exc

        self._options = options
        key = options.api_key or os.environ.get("OPENAI_API_KEY") or _PLACEHOLDER_KEY
        self._client = client or AsyncOpenAI(
            base_url=options.base_url, api_key=key, timeout=options.timeout_s, max_retries=0
        )
        self.label = f"openai-compatible: {options.model} at {self._client.base_url}"

    async def stream(self, messages: Sequence[Message]) -> AsyncGenerator[str]:
        """Yield the answer's deltas; closing the iterator closes the response.

        Raises:
            UpstreamError: connection refused, timeout, or an error status (message has the server's words).
        """
        import openai

        payload: list[Any] = [{"role": m.role, "content": m.content} for m in messages]
        try:
            response = await self._client.chat.completions.create(
                model=self._options.model,
                messages=payload,
                max_tokens=self._options.max_tokens,
                temperature=self._options.temperature,
                stream=True,
            )
            async with response:
                async for chunk in response:
                    if chunk.choices and chunk.choices[0].delta.content:
                        yield chunk.choices[0].delta.content
        except openai.APIStatusError as exc:
            raise UpstreamError(f"{self.label} answered {exc.status_code}: {exc.message}") from exc
        except openai.APIError as exc:
            raise UpstreamError(f"{self.label} failed: {exc}") from exc

    async def aclose(self) -> None:
        """Close the SDK's HTTP connection pool."""
        await self._client.close()
