"""``koe say`` loads what its one utterance needs: its voices and the language it is read in."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.fake import fake_speech

from koe.cli import main
from koe.pipeline.speech import Speech, SpeechOptions


@pytest.fixture
def loaded(monkeypatch: pytest.MonkeyPatch) -> list[SpeechOptions]:
    """What ``koe say`` asks :meth:`Speech.load` for; a fake speech answers."""
    asked: list[SpeechOptions] = []

    def load(options: SpeechOptions | None = None) -> Speech:
        assert options is not None
        asked.append(options)
        return fake_speech()

    monkeypatch.setattr(Speech, "load", staticmethod(load))
    return asked


@pytest.mark.parametrize(
    ("argv", "voices", "langs"),
    [
        (["-v", "af_heart"], ("af_heart",), ("en-us",)),
        (["-v", "bf_emma"], ("bf_emma",), ("en-gb",)),
        (["-v", "af_bella(2)+af_sky"], ("af_bella", "af_sky"), ("en-us",)),
        (["-v", "af_heart", "--lang", "en-gb"], ("af_heart",), ("en-gb",)),
        (["-v", "jf_alpha"], ("jf_alpha",), ("ja",)),
    ],
    ids=["american", "british", "blend", "lang-given", "japanese"],
)
def test_koe_say_loads_only_its_voices_and_its_language(
    loaded: list[SpeechOptions],
    tmp_path: Path,
    argv: list[str],
    voices: tuple[str, ...],
    langs: tuple[str, ...],
) -> None:
    out = tmp_path / "hi.wav"
    assert main(["say", "Hello there.", *argv, "-o", str(out)]) == 0
    assert out.read_bytes()[:4] == b"RIFF"
    (options,) = loaded
    assert options.voices == voices and options.required_voices == voices and options.langs == langs
    assert not options.warmup


@pytest.mark.parametrize("spec", ["af_heart+", "someone_else"], ids=["malformed", "not-koe's"])
def test_koe_say_narrows_nothing_for_a_voice_it_cannot_tell(
    loaded: list[SpeechOptions], tmp_path: Path, spec: str
) -> None:
    main(["say", "Hello there.", "-v", spec, "-o", str(tmp_path / "hi.wav")])
    (options,) = loaded
    assert options.voices == SpeechOptions().voices and options.langs == SpeechOptions().langs
