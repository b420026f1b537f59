"""The frozen settings: defaults, KOE_* variables, overrides, and validation that names the variable."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from koe.errors import ConfigError
from koe.settings import MAX_FRAME_S, AgentSettings, ProcessSettings, Settings


def test_environment_variables_are_typed_and_overrides_win() -> None:
    settings = Settings.from_env(
        {
            "KOE_PORT": "9000",
            "KOE_WORKERS": "2",
            "KOE_AUDIO_HIGH_WATER_S": "6.5",
            "KOE_MODEL_DIR": "/models",
            "KOE_HOST": "0.0.0.0",
            "KOE_WINDOWED": "1",
            "KOE_SEGMENT_CACHE_MB": "0",
            "KOE_PRECACHE": "builtin",
            "KOE_MEASURE_AFTER_READY": "false",
            "KOE_ENGINE": "Torch",
            "KOE_ALLOWED_HOSTS": " koe.internal, ,tts.internal ",
        },
        port=9100,
        workers=None,
    )
    assert (settings.port, settings.workers, settings.audio_high_water_s) == (9100, 2, 6.5)
    assert (settings.model_dir, settings.host, settings.engine) == (Path("/models"), "0.0.0.0", "torch")
    assert settings.allowed_hosts == ("koe.internal", "tts.internal")
    assert settings.windowed and not Settings().windowed
    assert (settings.segment_cache_mb, settings.precache) == (0.0, "builtin")
    assert Settings().segment_cache_mb > 0 and Settings().precache is None
    assert not settings.measure_after_ready and Settings().measure_after_ready


def test_the_defaults_bind_loopback_on_port_8080() -> None:
    settings = Settings.from_env({})
    assert (settings.host, settings.port) == ("127.0.0.1", 8080)


def test_every_limit_is_finite() -> None:
    for field in dataclasses.fields(Settings):
        value = getattr(Settings(), field.name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            assert value < float("inf"), field.name


@pytest.mark.parametrize(
    ("environ", "says"),
    [
        ({"KOE_PORT": "eighty"}, "KOE_PORT: expected int in [0, 65535], got 'eighty' (setting port)"),
        ({"KOE_IDLE_TIMEOUT_S": "inf"}, "KOE_IDLE_TIMEOUT_S: expected float > 0, got 'inf'"),
        ({"KOE_WINDOWED": "maybe"}, "KOE_WINDOWED: expected bool"),
        ({"KOE_MEASURE_AFTER_READY": "later"}, "KOE_MEASURE_AFTER_READY: expected bool"),
        ({"KOE_WORKERS": "0"}, "KOE_WORKERS: expected int >= 1, got '0' (setting workers)"),
        ({"KOE_FRAME_S": "0.5"}, f"KOE_FRAME_S: expected float in (0, {MAX_FRAME_S}]"),
        ({"KOE_ENGINE": "tensorrt"}, "KOE_ENGINE: expected one of onnx, torch, got 'tensorrt'"),
        ({"KOE_AUDIO_LOW_WATER_S": "20"}, "below audio_high_water_s"),
        ({"KOE_PORT": "70000"}, "port"),
        ({"KOE_SEGMENT_CACHE_MB": "-1"}, "segment_cache_mb"),
        ({"KOE_SEGMENT_CACHE_MB": "nan"}, "KOE_SEGMENT_CACHE_MB"),
        ({"KOE_SEGMENT_CACHE_MB": "1e9"}, "segment_cache_mb"),
    ],
)
def test_bad_values_fail_at_start_naming_the_setting(environ: dict[str, str], says: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(says)) as raised:
        Settings.from_env(environ)
    assert raised.value.code == "invalid_field"


def test_unknown_overrides_are_refused() -> None:
    with pytest.raises(ConfigError, match="max_speed"):
        Settings.from_env({}, max_speed=3)


def test_an_override_out_of_range_is_refused_like_a_variable() -> None:
    with pytest.raises(ConfigError, match="setting max_sessions") as raised:
        Settings(max_sessions=0)
    assert raised.value.code == "invalid_field"
    with pytest.raises(ConfigError, match="setting port"):
        dataclasses.replace(Settings(), port=-1)


def test_a_bad_api_key_is_named_but_never_repeated() -> None:
    with pytest.raises(ConfigError, match="KOE_API_KEY") as raised:
        Settings.from_env({"KOE_API_KEY": "short secret"})
    assert "short secret" not in raised.value.message


def test_settings_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Settings().port = 1  # type: ignore[misc]


def test_the_wyoming_port_is_off_unless_set_and_checked_when_it_is() -> None:
    assert Settings.from_env({}).wyoming_port is None
    assert Settings.from_env({"KOE_WYOMING_PORT": ""}).wyoming_port is None
    assert Settings.from_env({"KOE_WYOMING_PORT": "10200"}).wyoming_port == 10200
    with pytest.raises(ConfigError, match=re.escape("KOE_WYOMING_PORT: expected int in [0, 65535] or empty")):
        Settings.from_env({"KOE_WYOMING_PORT": "ten"})
    with pytest.raises(ConfigError, match="wyoming_port"):
        Settings.from_env({"KOE_WYOMING_PORT": "70000"})


def test_the_agents_and_every_commands_variables_are_read_by_the_same_rules() -> None:
    environ = {"KOE_LLM": " OpenAI ", "KOE_TTS": "ws://tts:8080", "KOE_LLM_MAX_TOKENS": ""}
    agent = AgentSettings.from_env(environ)
    assert (agent.llm, agent.tts, agent.llm_max_tokens) == ("openai", "ws://tts:8080", None)
    process = ProcessSettings.from_env({"KOE_LOG_LEVEL": "info", "KOE_CACHE_DIR": "/srv/koe"})
    assert (process.log_level, process.log_format, process.cache_dir) == ("INFO", "text", Path("/srv/koe"))
    assert ProcessSettings.from_env({"KOE_CACHE_DIR": ""}).cache_dir is None
    with pytest.raises(ConfigError, match=re.escape("KOE_LOG_LEVEL: expected one of DEBUG, INFO")):
        ProcessSettings.from_env({"KOE_LOG_LEVEL": "loud"})
