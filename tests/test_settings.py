"""The frozen settings: defaults, KOE_* variables, overrides, and validation that names the variable."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import koe.settings
from koe.errors import ConfigError
from koe.pipeline.speech import SpeechOptions
from koe.server.runtime import Runtime
from koe.settings import MAX_FRAME_S, AgentSettings, Layout, ProcessSettings, Settings, layout_of


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
        ({"KOE_WORKERS": "0"}, "KOE_WORKERS: expected int >= 1 or empty, got '0' (setting workers)"),
        ({"KOE_FRAME_S": "0.5"}, f"KOE_FRAME_S: expected float in (0, {MAX_FRAME_S}]"),
        ({"KOE_ENGINE": "tensorrt"}, "KOE_ENGINE: expected one of onnx, torch, got 'tensorrt'"),
        ({"KOE_AUDIO_LOW_WATER_S": "20"}, "below audio_high_water_s"),
        ({"KOE_PORT": "70000"}, "port"),
        ({"KOE_SEGMENT_CACHE_MB": "-1"}, "segment_cache_mb"),
        ({"KOE_SEGMENT_CACHE_MB": "nan"}, "KOE_SEGMENT_CACHE_MB"),
        ({"KOE_SEGMENT_CACHE_MB": "1e9"}, "segment_cache_mb"),
        ({"KOE_WHOLE_DECODE_MAX_S": "0"}, "KOE_WHOLE_DECODE_MAX_S: expected float > 0 or empty, got '0'"),
        ({"KOE_WHOLE_DECODE_MAX_S": "inf"}, "KOE_WHOLE_DECODE_MAX_S: expected float > 0 or empty"),
        ({"KOE_FLOAT_VOCODER": "maybe"}, "KOE_FLOAT_VOCODER: expected bool, got 'maybe'"),
        ({"KOE_TORCH_BUCKETS": "maybe"}, "KOE_TORCH_BUCKETS: expected bool or empty, got 'maybe'"),
        ({"KOE_TORCH_DTYPE": "half"}, "KOE_TORCH_DTYPE: expected one of float32, float16, bfloat16"),
        ({"KOE_CAPACITY_SHARE": "1.5"}, "KOE_CAPACITY_SHARE: expected float in [0, 1], got '1.5'"),
        ({"KOE_CAPACITY_SHARE": "nan"}, "KOE_CAPACITY_SHARE: expected float in [0, 1], got 'nan'"),
        ({"KOE_CAPACITY_SHARE": "half"}, "KOE_CAPACITY_SHARE: expected float in [0, 1], got 'half'"),
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


@pytest.mark.parametrize(
    ("cores", "workers", "threads"), [(1, 2, 1), (2, 2, 2), (4, 4, 2), (8, 8, 2), (16, 16, 2)]
)
def test_the_cores_size_a_worker_each_of_two_threads_and_two_cores_the_measured_two_by_two(
    cores: int, workers: int, threads: int
) -> None:
    layout = layout_of(None, None, cores)
    assert (layout.workers, layout.threads, layout.given) == (workers, threads, ())
    assert not layout.spin  # two threads a core: ONNX Runtime's threads sleep between operators


def test_a_setting_given_wins_and_the_other_is_still_sized(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(koe.settings, "usable_cores", lambda: 8)
    assert Settings.from_env({"KOE_WORKERS": "3"}).layout == Layout(3, 2, 8, ("workers",))
    assert Settings.from_env({}, threads_per_worker=4).layout == Layout(8, 4, 8, ("threads_per_worker",))
    both = Settings.from_env({"KOE_WORKERS": "1", "KOE_THREADS_PER_WORKER": "8"}, workers=1)
    assert both.layout == Layout(1, 8, 8, ("workers", "threads_per_worker"))
    assert both.layout.spin
    assert (
        str(both.layout) == "1 worker × 8 threads on 8 usable cores (workers and threads_per_worker as set)"
    )
    assert str(Settings().layout) == "8 workers × 2 threads for 8 usable cores"


def test_the_cores_are_read_once_per_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[int] = []
    monkeypatch.setattr(koe.settings, "usable_cores", lambda: reads.append(4) or 4)
    settings = Settings()
    assert settings.layout is settings.layout
    assert reads == [4]


@pytest.mark.parametrize(("cores", "workers", "threads"), [(1, 2, 1), (16, 16, 2)])
def test_the_engine_and_the_scheduler_run_the_sized_layout(
    monkeypatch: pytest.MonkeyPatch, cores: int, workers: int, threads: int
) -> None:
    monkeypatch.setattr(koe.settings, "usable_cores", lambda: cores)
    settings = Settings()
    engine = SpeechOptions.from_settings(settings).engine
    assert (engine.threads, engine.spin) == (threads, False)
    assert Runtime(settings).scheduler.workers == workers


def test_the_engine_settings_reach_the_options_the_engine_is_loaded_with() -> None:
    engine = SpeechOptions.from_settings(
        Settings.from_env(
            {"KOE_WHOLE_DECODE_MAX_S": "2", "KOE_FLOAT_VOCODER": "0", "KOE_TORCH_DTYPE": "bfloat16"}
        )
    ).engine
    assert (engine.whole_decode_max_s, engine.float_vocoder, engine.dtype) == (2.0, False, "bfloat16")
