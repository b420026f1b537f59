"""Choosing the agent's LLM from ``KOE_LLM*`` variables and flags."""

from __future__ import annotations

import pytest

from koe.agent.config import LLMConfig, local_installed
from koe.errors import ConfigError


def test_a_base_url_or_an_api_key_selects_the_openai_compatible_source() -> None:
    config = LLMConfig.from_env({"KOE_LLM_BASE_URL": "http://127.0.0.1:11434/v1", "KOE_LLM_MODEL": "qwen3"})
    assert (config.kind, config.model, config.base_url) == ("openai", "qwen3", "http://127.0.0.1:11434/v1")
    assert config.describe() == "openai-compatible: qwen3 at http://127.0.0.1:11434/v1"
    assert LLMConfig.from_env({"OPENAI_API_KEY": "sk-test"}).kind == "openai"


def test_without_settings_auto_picks_the_local_model_when_installed() -> None:
    assert LLMConfig.from_env({}).kind == ("local" if local_installed() else "none")


def test_flags_override_the_environment() -> None:
    config = LLMConfig.from_env(
        {"KOE_LLM": "openai", "KOE_LLM_MAX_TOKENS": "50"}, kind="bedrock", model="amazon.nova-micro-v1:0"
    )
    assert (config.kind, config.model, config.max_tokens) == ("bedrock", "amazon.nova-micro-v1:0", 50)


@pytest.mark.parametrize(
    "environ",
    [
        {"KOE_LLM": "gpt"},
        {"KOE_LLM": "bedrock"},
        {"KOE_LLM": "openai", "KOE_LLM_MAX_TOKENS": "many"},
        {"KOE_LLM": "openai", "KOE_LLM_MAX_TOKENS": "0"},
    ],
)
def test_bad_settings_fail_at_start_up_naming_the_variable(environ: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="KOE_LLM") as caught:
        LLMConfig.from_env(environ)
    assert caught.value.code == "invalid_field"


def test_none_says_how_to_enable_an_llm() -> None:
    with pytest.raises(ConfigError, match=r"make extra EXTRA=local-llm") as caught:
        LLMConfig("none").build()
    assert caught.value.code == "no_llm"


def test_the_description_never_shows_credentials_in_the_llm_url() -> None:
    url = "https://user:s3cret@llm.example.com:8443/v1?api_key=k3y#frag"
    described = LLMConfig("openai", model="m", base_url=url).describe()
    assert "llm.example.com:8443/v1" in described
    assert not any(secret in described for secret in ("user", "s3cret", "k3y", "frag"))
