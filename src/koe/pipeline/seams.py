"""Where segments join: trimming each utterance's silent edges so a join sounds like a pause inside one.

Kokoro frames every utterance with silence: the leading padding token lasts 13–20 frames (0.33–0.5 s) and
the final punctuation plus the trailing pad another 7–11, all below -75 dBFS except the lead's last frames,
where the first phoneme's onset begins. Inside one utterance the same sentence boundary is 6–7 frames
(". " = 4 + 3) and a comma 4–5 (", " = 3 + 2) — measured on af_heart, am_michael and bf_emma
(docs/text.md, "Joins"). So concatenated segments would pause 0.5–0.6 s at every join where whole-text
synthesis pauses 0.15 s, and a listener hears a slow, halting agent; the first segment's lead is also
0.35 s of silence before the first word. From each utterance's durations (stage A's output) this module
says what to keep: the lead's last :data:`ONSET_FRAMES`, and of the silent tail what a pause of that kind
lasts inside one utterance. A turn's first segment decoded in windows keeps its lead: nothing plays before
it, so the listener hears speech no later for it, and its silence, sent at once, covers the first window's
decoding (trimmed, the first window would arrive after the 75 ms left had played: a gap before speech).
A pause the text asks for is measured on the audio instead (:func:`quiet_start`, :func:`quiet_end`): the
words around it are that far apart from sound to sound.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from koe.engine.timing import FRAME_SAMPLES, SegmentTiming
from koe.engine.vocab import vocabulary
from koe.types import SAMPLE_RATE, Audio

#: Frames of the leading pad that are kept: its last frames already carry the onset of the first phoneme
#: (measured: the energy rises 2–3 frames before the pad ends).
ONSET_FRAMES = 3
#: The silent tail kept after an utterance, in frames, by how it ends: with the next utterance's first
#: (silent) onset frames, a join then lasts what Kokoro itself leaves at that boundary inside one utterance.
SENTENCE_TAIL_FRAMES = 5
CLAUSE_TAIL_FRAMES = 3
WORD_TAIL_FRAMES = 1
_SENTENCE_ENDS = frozenset(".!?…")
_CLAUSE_ENDS = frozenset(",;:—")
#: Symbols that are silence or punctuation: the tail of an utterance is the run of these at its end.
_QUIET = frozenset(' .,!?;:—…"()“”')
#: A 5 ms fade-out where the tail is cut (the cut is in silence; the fade keeps it click-free whatever).
FADE_SAMPLES = 120


@dataclass(frozen=True, slots=True)
class Trim:
    """Samples ``[start, end)`` of an utterance are kept."""

    start: int
    end: int

    @property
    def start_s(self) -> float:
        return self.start / SAMPLE_RATE

    @property
    def samples(self) -> int:
        return self.end - self.start

    def apply(self, audio: Audio, offset: int) -> Audio:
        """The kept part of ``audio``, which holds samples ``[offset, offset + len(audio))``."""
        low, high = max(self.start, offset), min(self.end, offset + audio.size)
        if high <= low:
            return audio[:0]
        kept = audio[low - offset : high - offset]
        fade_from = self.end - FADE_SAMPLES
        if high > fade_from:  # the part reaches into the fade before the cut
            first = max(low, fade_from)
            ramp = (self.end - np.arange(first, high, dtype=np.float32)) / np.float32(FADE_SAMPLES)
            kept = kept.copy()
            kept[first - low :] *= ramp
        return kept


def trim(timing: SegmentTiming, *, keep_lead: bool = False) -> Trim:
    """What to keep of the utterance ``timing`` times (its phonemes tell how it ends); ``keep_lead`` keeps
    all of its leading silence."""
    durations = timing.durations
    lead = int(durations[0])
    symbols = [symbol for symbol in timing.phonemes if symbol in vocabulary()]
    quiet = 0  # trailing punctuation and spaces
    while quiet < len(symbols) and symbols[-1 - quiet] in _QUIET:
        quiet += 1
    ending = "".join(symbols[len(symbols) - quiet :])
    tail = int(durations[len(durations) - 1 - quiet :].sum())  # those tokens and the trailing pad
    if any(symbol in _SENTENCE_ENDS for symbol in ending):
        keep_tail = SENTENCE_TAIL_FRAMES
    elif any(symbol in _CLAUSE_ENDS for symbol in ending):
        keep_tail = CLAUSE_TAIL_FRAMES
    else:
        keep_tail = WORD_TAIL_FRAMES
    start = 0 if keep_lead else max(0, lead - ONSET_FRAMES)
    end = timing.frames - max(0, tail - keep_tail)
    return Trim(start * FRAME_SAMPLES, max(end, start) * FRAME_SAMPLES)


#: A 5 ms window below this level is quiet: a pause's length is measured between sounds so.
QUIET_DB = -60.0
QUIET_WINDOW = SAMPLE_RATE // 200
#: Quiet an utterance's audio ends with, once trimmed, after a sentence's end (its last phoneme fades
#: well before its duration ends), and quiet its kept onset frames start with (a few tens of milliseconds
#: at most): what a pause past a segment's edge counts for the segment on the other side, which it cannot
#: measure.
SEGMENT_END_QUIET_S = 0.35
ONSET_QUIET_S = 0.02


def quiet_start(audio: Audio) -> int:
    """Samples of quiet (:data:`QUIET_DB`, in :data:`QUIET_WINDOW` windows) ``audio`` starts with."""
    return _quiet_windows(audio[: audio.size // QUIET_WINDOW * QUIET_WINDOW]) * QUIET_WINDOW


def quiet_end(audio: Audio) -> int:
    """Samples of quiet ``audio`` ends with (as :func:`quiet_start`)."""
    whole = audio.size // QUIET_WINDOW * QUIET_WINDOW
    return _quiet_windows(audio[audio.size - whole :][::-1]) * QUIET_WINDOW


def _quiet_windows(audio: Audio) -> int:
    windows = audio.reshape(-1, QUIET_WINDOW).astype(np.float64)
    loud = 20 * np.log10(np.sqrt((windows**2).mean(axis=1)) + 1e-12) >= QUIET_DB
    return int(np.argmax(loud)) if loud.any() else len(loud)
