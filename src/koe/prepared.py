"""What ``koe install`` computes once so that no start has to: it is kept in koe's cache, and an image built
with it carries it to every container (docs/operations.md, "Cold start")."""

from __future__ import annotations

from pathlib import Path

from koe.settings import Settings


def prepare_onnx(settings: Settings, voices_dir: Path) -> None:
    """The stage cut's proof (loading the engine once records it), the stage graphs ONNX Runtime optimized
    (kept for any CPU of this architecture) and the default voice's windowing calibration, which depends on
    the model, koe and the voice, not the machine: an image built with them spares every container's first
    start seconds of CPU, most of them the calibration's. Its window costs are timed too, kept for this CPU
    only."""
    from koe.engine.assets import ModelSource
    from koe.engine.registry import EngineOptions, load_engine
    from koe.engine.voices import VoiceBank

    source = ModelSource(model_path=None, voices_dir=voices_dir)
    engine = load_engine(EngineOptions(threads=settings.layout.threads), source)
    engine.prepare(VoiceBank.load(voices_dir).resolve(settings.default_voice))  # a name or a blend


def prepare_g2p(settings: Settings) -> None:
    """Build the G2P of the default voice's language once, for what it keeps in koe's cache (misaki's grown
    dictionaries: a share of every later build, and they depend on misaki's data, not the machine)."""
    from koe.engine.voices import language_of, parse_blend
    from koe.g2p.registry import G2PRegistry

    first_voice = parse_blend(settings.default_voice)[0][0]
    G2PRegistry().get(language_of(first_voice).code)
