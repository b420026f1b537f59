"""What one turn or request produced, for its single summary log line (docs/operations.md, "Logs")."""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass(slots=True)
class Tally:
    """Segments, audio and synthesis time of one turn (WebSocket) or request (HTTP), as they happen."""

    segments: int = 0
    audio_s: float = 0.0
    synthesis_s: float = 0.0
    first_audio_at: float | None = None  # time.monotonic() of the first segment with audio
    #: WebSocket turns: flushed, cancelled, refused (overload); HTTP: completed; either: abandoned
    #: (the client left or the session ended first)
    outcome: str = "abandoned"

    def add(self, took_s: float, audio_s: float) -> None:
        """Count one synthesized segment; one without audio (nothing speakable) adds only its time."""
        self.synthesis_s += took_s
        if audio_s > 0:
            self.segments += 1
            self.audio_s += audio_s

    def audio_sent(self) -> None:
        """Audio went out; the first time is the first audio (with windows, before its segment ends)."""
        if self.first_audio_at is None:
            self.first_audio_at = time.monotonic()

    def fields(self, started_at: float | None) -> dict[str, object]:
        """The log fields; ``first_audio_ms`` counts from ``started_at`` (``None`` when either is unknown)."""
        first_ms = None
        if self.first_audio_at is not None and started_at is not None:
            first_ms = round((self.first_audio_at - started_at) * 1000, 1)
        return {
            "outcome": self.outcome,
            "segments": self.segments,
            "audio_s": round(self.audio_s, 3),
            "first_audio_ms": first_ms,
            # significant digits, not decimals: a fast engine's rtf (a GPU's, the fake's) is not shown as 0
            "rtf": float(f"{self.synthesis_s / self.audio_s:.3g}") if self.audio_s else None,
        }
