""":meth:`Speech.load` runs engine work beside the G2P's build: the engine and voices are loaded when it
runs, the G2P need not be (the fake engine stands in for the model; the voices are the installed ones)."""

from __future__ import annotations

import threading

import pytest

from koe.engine.base import Engine
from koe.engine.voices import VoiceBank
from koe.g2p.registry import G2PRegistry
from koe.pipeline import speech as speech_module
from koe.pipeline.speech import Speech, SpeechOptions
from koe.text.languages.lookup import rules_for
from koe.text.normalize import _compiled
from support.fake import FakeEngine, FakeG2P

WAIT_S = 30.0


@pytest.fixture
def g2p_waits_for_the_hook(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """The G2P's build cannot finish before ``hooked`` is set; the engine is a fake one."""
    hooked = threading.Event()

    def build(registry: G2PRegistry, langs: tuple[str, ...]) -> float:
        if not hooked.wait(WAIT_S):
            raise TimeoutError("the hook did not run while the G2P was building")
        return 0.0

    monkeypatch.setattr(speech_module, "_build_g2p", build)
    monkeypatch.setattr(speech_module, "load_engine", lambda options, source: FakeEngine())
    return hooked


def test_work_beside_the_g2p_runs_on_the_loaded_engine_and_required_voices_while_the_g2p_builds(
    g2p_waits_for_the_hook: threading.Event,
) -> None:
    seen: list[tuple[Engine, tuple[str, ...]]] = []

    def beside(engine: Engine, voices: VoiceBank) -> None:
        seen.append((engine, tuple(voices.names())))
        g2p_waits_for_the_hook.set()

    options = SpeechOptions(warmup=False)
    speech = Speech.load(options, beside_g2p=beside)
    assert seen == [(speech.engine, options.required_voices)]  # the one voice it needs, not all of them
    assert len(speech.voices.names()) > len(options.required_voices)


def test_work_beside_the_g2p_that_fails_fails_the_load(g2p_waits_for_the_hook: threading.Event) -> None:
    def beside(engine: Engine, voices: VoiceBank) -> None:
        g2p_waits_for_the_hook.set()
        raise RuntimeError("the proof failed")

    with pytest.raises(RuntimeError, match="the proof failed"):
        Speech.load(SpeechOptions(warmup=False), beside_g2p=beside)


def test_work_beside_the_g2p_has_the_voices_a_blended_default_voice_is_made_of(
    g2p_waits_for_the_hook: threading.Event,
) -> None:
    seen: list[tuple[str, ...]] = []

    def beside(engine: Engine, voices: VoiceBank) -> None:
        voices.resolve("af_heart+am_michael")  # raises VoiceError without both
        seen.append(tuple(voices.names()))
        g2p_waits_for_the_hook.set()

    Speech.load(SpeechOptions(warmup=False, required_voices=("af_heart+am_michael",)), beside_g2p=beside)
    assert seen == [("af_heart", "am_michael")]


def test_a_language_built_at_load_has_its_text_rules_compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its first normalize then compiles nothing: that runs on the server's event loop, tens of ms a
    language."""
    monkeypatch.setattr(speech_module, "load_engine", lambda options, source: FakeEngine())
    monkeypatch.setattr(G2PRegistry, "get", lambda registry, lang: FakeG2P(lang))
    _compiled.cache_clear()
    Speech.load(SpeechOptions(warmup=False, langs=("es", "zh")))
    compiled = _compiled.cache_info().misses
    for lang, text in (("es", "Hola, 2 amigos."), ("zh", "你好，2个朋友。")):
        assert rules_for(lang).normalize(text).spoken
    assert _compiled.cache_info().misses == compiled
