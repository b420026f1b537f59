"""How many frames of whole decodes may be in progress at once: what bounds the engine's peak memory.

A whole decode holds stage B's intermediates for every frame of its segment until it ends (about half a
megabyte per frame, docs/operations.md, "Memory"), and ONNX Runtime frees them only then. Workers that each
decode a long segment whole add these up: the process's peak grows with the number of workers, not with the
work. A :class:`FrameBudget` lets a whole decode start only while the frames of those in progress, its own
included, stay within :data:`WHOLE_FRAMES_AT_ONCE`, or when none is in progress (so a segment longer than the
budget still decodes, alone). On cores that the decodes in progress already keep busy, a decode that waits
finishes about when it would have beside the other, which finishes sooner; its audio is the same.
Windows are not counted: at most ``MAX_WINDOW_FRAMES`` plus context each, they hold little.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: Frames (10 s of audio) of whole decodes in progress at once: two agent sentences of a few seconds decode
#: side by side, two long ones one after the other.
WHOLE_FRAMES_AT_ONCE = 400
#: How often a waiting decode looks at its cancel flag (a plain ``threading.Event`` cannot wake it).
_CANCEL_CHECK_S = 0.05


class FrameBudget:
    """Frames of whole decodes in progress, shared by every worker thread of one engine. Thread-safe."""

    def __init__(self, frames: int = WHOLE_FRAMES_AT_ONCE) -> None:
        if frames < 1:
            raise ValueError(f"expected a budget of at least 1 frame, got {frames}")
        self.frames = frames
        self._held = 0
        self._changed = threading.Condition()

    @property
    def held(self) -> int:
        """Frames of the decodes in progress now."""
        with self._changed:
            return self._held

    @contextmanager
    def holding(self, frames: int, cancel: threading.Event | None = None) -> Iterator[bool]:
        """Hold ``frames`` for the ``with`` block, once they fit beside those held (at once when none are).
        Yields ``False``, holding nothing, when ``cancel`` was set while it waited; cancelling is safe."""
        if not self._take(frames, cancel):
            yield False
            return
        try:
            yield True
        finally:
            with self._changed:
                self._held -= frames
                self._changed.notify_all()

    def _take(self, frames: int, cancel: threading.Event | None) -> bool:
        with self._changed:
            while self._held and self._held + frames > self.frames:
                if cancel is not None and cancel.is_set():
                    return False
                self._changed.wait(_CANCEL_CHECK_S)
            self._held += frames
            return True
