"""Pre-warming the segment cache with what agents say first, after the server is ready, at lowest priority.

``KOE_PRECACHE=builtin`` takes :data:`BUILTIN_OPENERS` for the default voice; ``KOE_PRECACHE=/path.json``
takes a JSON object of voice → openers (``{"af_heart": ["Sure, I can help with that."], ...}``). Each
opener is cut as a streamed turn's first segment in its voice's language is cut (that language's
segmenter, told :data:`~koe.pipeline.stream.MIN_HINT_CHARS` in its own characters), and that segment is
synthesized whole and kept (a hit is replayed whole, windowed or not). The file is read and checked when
the server is created (a bad file stops it there, naming the problem); the synthesis starts once
``/ping`` is already 200 and runs one job at a time with a deadline later than any listener's, so a live
turn always goes first and at most one worker is ever busy warming. Without it, the cache still learns
each segment the first time it is decoded (:mod:`koe.pipeline.stream`).
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Mapping
from pathlib import Path

from koe.engine.voices import AMERICAN, language_of, parse_blend
from koe.errors import ConfigError, KoeError, VoiceError
from koe.pipeline.cache import segment_key
from koe.pipeline.job import SegmentJob
from koe.pipeline.markup import check_text
from koe.pipeline.stream import MIN_HINT_CHARS, own_chars
from koe.pipeline.synthesizer import Synthesizer
from koe.text.languages.lookup import rules_for, segmenter_for
from koe.text.segment import Segment

logger = logging.getLogger(__name__)

BUILTIN = "builtin"
#: Clauses voice agents open their answers with, each a whole first segment (≤ MIN_HINT_CHARS characters).
BUILTIN_OPENERS = (
    "Sure, I can help with that.",
    "Of course, I can help with that.",
    "Let me check that for you.",
    "Okay, let me take a look.",
    "Here's what I found.",
    "Great question!",
    "Sure!",
    "Of course!",
    "Absolutely!",
    "Thanks for waiting.",
    "I'm sorry, I didn't catch that.",
    "Let me think about that.",
)
#: Openers a file may name, over all its voices: pre-warming is for a few clauses, not a corpus.
MAX_OPENERS = 256
MAX_OPENER_CHARS = 300
#: Later than any listener's deadline: the scheduler runs every live job first.
_LOWEST_PRIORITY = math.inf

Openers = Mapping[str, tuple[str, ...]]


def parse_openers(spec: str | None, default_voice: str) -> dict[str, tuple[str, ...]]:
    """What ``KOE_PRECACHE`` names: nothing (unset), the built-in list, or a JSON file's voice → openers.

    Raises:
        ConfigError: the file cannot be read, is not a JSON object of voice → list of non-empty strings,
            names a malformed voice, holds an opener in a script its voice's language cannot read
            (``unsupported_script``) or with markup that cannot be honoured (``invalid_markup``), or holds
            more than :data:`MAX_OPENERS` openers.
    """
    if not spec:
        return {}
    if spec == BUILTIN:
        return {default_voice: BUILTIN_OPENERS}
    where = f"KOE_PRECACHE file {spec}"
    try:
        data = json.loads(Path(spec).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{where} cannot be read: {exc.strerror}", code="invalid_field") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{where} is not JSON: {exc}", code="invalid_field") from exc
    if not isinstance(data, dict):
        raise ConfigError(
            f"{where}: expected an object of voice → openers, got {type(data).__name__}", code="invalid_field"
        )
    openers: dict[str, tuple[str, ...]] = {}
    for voice, texts in data.items():
        try:
            blend = parse_blend(voice)
        except VoiceError as exc:
            raise ConfigError(f"{where}: {exc.message}", code="invalid_field") from exc
        if not isinstance(texts, list) or not all(
            isinstance(t, str) and t.strip() and len(t) <= MAX_OPENER_CHARS for t in texts
        ):
            raise ConfigError(
                f"{where}: {voice!r} must map to a list of non-empty strings of at most "
                f"{MAX_OPENER_CHARS} characters",
                code="invalid_field",
            )
        lang = language_of(blend[0][0]).code  # a blend of languages is refused when the voice is resolved
        for text in texts:
            try:
                check_text(text, lang)
            except ConfigError as exc:
                raise ConfigError(f"{where}: {voice!r}: {exc.message}", code=exc.code) from exc
        openers[voice] = tuple(texts)
    count = sum(len(texts) for texts in openers.values())
    if count > MAX_OPENERS:
        raise ConfigError(f"{where} names {count} openers; at most {MAX_OPENERS}", code="invalid_field")
    return openers


def first_segment(text: str, lang: str = AMERICAN) -> Segment | None:
    """``text``'s first segment, cut as a streamed turn's first segment in ``lang`` is (``None`` when
    nothing is speakable)."""
    segmenter = segmenter_for(lang)
    segmenter.set_next_limit(own_chars(MIN_HINT_CHARS, rules_for(lang).chars_per_char))
    segments = [*segmenter.feed(text), *segmenter.flush()]
    return segments[0] if segments else None


async def precache(synthesizer: Synthesizer, openers: Openers) -> int:
    """Synthesize each opener's first segment that the cache lacks, one job at a time at lowest priority;
    returns how many were stored. An unknown voice or a failed segment is logged and skipped; the scheduler
    shutting down ends it. Cancelling is safe (the job in progress is dropped)."""
    speech, cache = synthesizer.speech, synthesizer.cache
    stored = 0
    for spec, texts in openers.items():
        try:
            voice = speech.voice(spec)
        except KoeError as exc:
            logger.warning("precache: skipping voice %r: %s", spec, exc.message)
            continue
        for text in texts:
            segment = first_segment(text, voice.lang)
            if segment is None:
                continue
            key = segment_key(speech.identity, voice, segment.spoken_text)
            if key in cache:
                continue
            job = SegmentJob(speech, segment, voice, threading.Event())
            estimate = synthesizer.cost.audio_s(len(segment.spoken_text), voice.speed)
            try:
                part = await synthesizer.scheduler.submit(
                    job.step, deadline=_LOWEST_PRIORITY, cost_s=synthesizer.cost.synthesis_s(estimate)
                )
            except KoeError as exc:
                if exc.code == "shutting_down":
                    return stored
                logger.warning("precache: %r failed: %s", segment.spoken_text, exc.message)
                continue
            stored += cache.put(key, part.audio, job.timings)
    logger.info("precache: %d segments stored (%d bytes in the cache)", stored, cache.stats.bytes)
    return stored
