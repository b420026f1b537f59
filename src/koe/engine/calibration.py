"""Per-voice normalization statistics for windowed decoding: computed once, cached on disk, verified.

A window normalized with its own statistics comes out muffled and quiet; one normalized with the voice's
typical statistics sounds like the whole decode. Those are the frame-weighted means of the statistics
stage B computes on a few calibration sentences (~10 s of CPU per voice here), so they are computed on a
voice's first use — in a background thread, while that voice's segments decode whole — and kept under
koe's cache directory. A cached file is used only if its key (model hash, koe version, calibration set,
the voice's style table) matches and every array has the expected name, shape and finite values.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import zipfile
from collections import OrderedDict
from pathlib import Path

import numpy as np

from koe import __version__
from koe.engine.stages import Stages, Statistics
from koe.engine.vocab import tokenize
from koe.errors import SynthesisError
from koe.types import StyleTable

logger = logging.getLogger(__name__)

#: Calibration sentences, already phonemized (the engine is language-blind): "Good morning! I have checked
#: the numbers, and everything looks fine for the launch next week." and "Could you bring the blue folder
#: from my desk? We should read it together before lunch." Two sentences give the same quality as three.
CALIBRATION_PHONEMES = (
    "ɡˈʊd mˈɔɹnɪŋ! ˌI hæv ʧˈɛkt ðə nˈʌmbəɹz, ænd ˈɛvəɹiθˌɪŋ lˈʊks fˈIn fɔɹ ðə lˈɔnʧ nˈɛkst wˈik.",
    "kˌʊd ju bɹˈɪŋ ðə blˈu fˈOldəɹ fɹʌm mI dˈɛsk? wˌi ʃˌʊd ɹˈid ɪt təɡˈɛðəɹ bəfˈɔɹ lˈʌnʧ.",
)
#: Bump when the calibration recipe changes, so old cache files are not reused.
CALIBRATION_VERSION = 1
_MAX_IN_MEMORY = 64  # voices and blends kept in memory (~140 KB each)


class Calibration:
    """Statistics per style table. Thread-safe; at most one calibration computes at a time."""

    def __init__(
        self, stages: Stages, model_sha256: str, directory: Path, *, background: bool = True
    ) -> None:
        self._stages = stages
        self._background_enabled = background
        self.model_sha256 = model_sha256
        self.directory = directory
        self._memory: OrderedDict[str, Statistics] = OrderedDict()
        self._pending: set[str] = set()
        self._lock = threading.Lock()
        self._compute_lock = threading.Lock()

    def key(self, style: StyleTable) -> str:
        """What the statistics depend on: the model, koe's code, the calibration set and the voice."""
        digest = hashlib.sha256()
        for part in (self.model_sha256, __version__, str(CALIBRATION_VERSION), *CALIBRATION_PHONEMES):
            digest.update(part.encode())
            digest.update(b"\0")
        digest.update(np.ascontiguousarray(style, dtype=np.float32).tobytes())
        return digest.hexdigest()

    def lookup(self, style: StyleTable) -> Statistics | None:
        """The voice's statistics from memory or disk, or ``None`` when it has not been calibrated."""
        key = self.key(style)
        with self._lock:
            cached = self._memory.get(key)
        if cached is not None:
            return cached
        loaded = self._load(key)
        if loaded is not None:
            self._remember(key, loaded)
        return loaded

    def calibrate(self, style: StyleTable) -> Statistics:
        """Statistics for ``style``, computing and caching them now if needed (seconds of CPU)."""
        found = self.lookup(style)
        if found is not None:
            return found
        with self._compute_lock:
            found = self.lookup(style)  # another thread may have finished it meanwhile
            if found is not None:
                return found
            key = self.key(style)
            started = time.perf_counter()
            statistics = self._compute(style)
            logger.info("calibrated a voice in %.1f s (%s…)", time.perf_counter() - started, key[:12])
            self._remember(key, statistics)
            self._store(key, statistics)
            return statistics

    def calibrate_in_background(self, style: StyleTable) -> None:
        """Start calibrating ``style`` on a daemon thread unless that is under way or disabled."""
        key = self.key(style)
        with self._lock:
            if not self._background_enabled or key in self._pending:
                return
            self._pending.add(key)
        worker = threading.Thread(
            target=self._background, args=(key, style), name="koe-calibrate", daemon=True
        )
        worker.start()

    def _background(self, key: str, style: StyleTable) -> None:
        try:
            self.calibrate(style)
        except Exception:  # a failed calibration only keeps that voice on whole-segment decoding
            logger.exception("calibration failed; this voice keeps decoding whole segments")
        finally:
            with self._lock:
                self._pending.discard(key)

    def _compute(self, style: StyleTable) -> Statistics:
        totals: list[np.ndarray] | None = None
        frames = 0
        for phonemes in CALIBRATION_PHONEMES:
            ids = tokenize(phonemes)
            row = style[len(ids) - 1]
            front = self._stages.run_front(ids, row, 1.0)
            _audio, statistics = self._stages.decode(front, row)
            weighted = [value.astype(np.float64) * front.frames for value in statistics]
            totals = weighted if totals is None else [a + b for a, b in zip(totals, weighted, strict=True)]
            frames += front.frames
        assert totals is not None  # CALIBRATION_PHONEMES is a non-empty constant
        result = tuple((total / frames).astype(np.float32) for total in totals)
        problem = self._problem(result)
        if problem:
            raise SynthesisError(f"calibration produced unusable statistics: {problem}")
        return result

    def _problem(self, statistics: Statistics) -> str | None:
        """Why a set of statistics cannot be used, or ``None``."""
        if len(statistics) != len(self._stages.statistic_names):
            return f"{len(statistics)} arrays, expected {len(self._stages.statistic_names)}"
        for name, value in zip(self._stages.statistic_names, statistics, strict=True):
            if value.dtype != np.float32 or value.ndim != 3 or value.shape[0] != 1 or value.shape[2] != 1:
                return f"{name} has dtype {value.dtype} and shape {value.shape}, expected float32 (1, C, 1)"
            if not np.isfinite(value).all():
                return f"{name} has non-finite values"
        return None

    def _path(self, key: str) -> Path:
        return self.directory / f"{key}.npz"

    def _load(self, key: str) -> Statistics | None:
        path = self._path(key)
        if not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as archive:
                names = tuple(str(name) for name in archive["arr_0"])
                statistics = tuple(archive[f"arr_{index + 1}"] for index in range(len(names)))
        except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
            logger.warning("ignoring unreadable calibration file %s: %s", path, exc)
            return None
        problem = (
            "names differ from the model's" if names != self._stages.statistic_names else None
        ) or self._problem(statistics)
        if problem:
            logger.warning("ignoring calibration file %s: %s", path, problem)
            return None
        return statistics

    def _store(self, key: str, statistics: Statistics) -> None:
        path = self._path(key)
        partial = path.with_suffix(".partial.npz")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            np.savez(partial, np.array(self._stages.statistic_names), *statistics)  # arr_0: names
            partial.replace(path)
        except OSError as exc:  # a read-only cache costs a recalibration per process, nothing more
            logger.warning("could not cache calibration in %s: %s", self.directory, exc)

    def _remember(self, key: str, statistics: Statistics) -> None:
        with self._lock:
            self._memory[key] = statistics
            self._memory.move_to_end(key)
            while len(self._memory) > _MAX_IN_MEMORY:
                self._memory.popitem(last=False)
