"""Per-voice calibration for windowed decoding: computed once, cached on disk, verified.

A window normalized with its own statistics comes out muffled and quiet; one normalized with the
statistics the whole segment would have had sounds like the whole decode. Those are estimated from the
voice's moments over quiet and voiced frames (:mod:`koe.engine.onnx.moments`), measured by stage B on a few
calibration sentences (seconds of CPU per voice), so they are computed on a voice's first use — in a
background thread, while that voice's segments decode whole — and kept under koe's cache directory. A
cached file is used only if its key (model hash, koe version, calibration set, the voice's style table)
matches and every array has the expected name, shape and finite values.

Blend weights are free-form, so clients can ask for any number of distinct style tables: at most
:data:`MAX_PENDING` calibrations are under way at once (a voice asked for meanwhile keeps decoding whole
and is tried again on its next segment), and the directory keeps the :data:`MAX_FILES` most recently used.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import threading
import time
import zipfile
from collections import OrderedDict
from pathlib import Path

import numpy as np

from koe import __version__
from koe.engine.onnx.moments import ClassMoments
from koe.engine.onnx.stages import Stages
from koe.engine.vocab import tokenize
from koe.errors import SynthesisError
from koe.machine import partial_of, prune_to_used_last
from koe.types import StyleTable

logger = logging.getLogger(__name__)

#: Calibration sentences, already phonemized (the engine is language-blind), with the speed each is spoken
#: at: "Good morning! I have checked the numbers, and everything looks fine for the launch next week." and
#: "Could you bring the blue folder from my desk? We should read it together before lunch." One slow and one
#: fast take fit speeds 0.8–1.3 better than two at 1.0 (a smaller log-mel distance in the worst speed
#: band); adding two short sentences helped nothing.
CALIBRATION_SET = (
    ("ɡˈʊd mˈɔɹnɪŋ! ˌI hæv ʧˈɛkt ðə nˈʌmbəɹz, ænd ˈɛvəɹiθˌɪŋ lˈʊks fˈIn fɔɹ ðə lˈɔnʧ nˈɛkst wˈik.", 0.85),
    ("kˌʊd ju bɹˈɪŋ ðə blˈu fˈOldəɹ fɹʌm mI dˈɛsk? wˌi ʃˌʊd ɹˈid ɪt təɡˈɛðəɹ bəfˈɔɹ lˈʌnʧ.", 1.2),
)
#: Bump when the calibration recipe changes, so old cache files are not reused.
CALIBRATION_VERSION = 2
_MAX_IN_MEMORY = 64  # voices and blends kept in memory (~290 KB each)
#: Background calibrations at once (one computes, the next waits): each costs seconds of one core.
MAX_PENDING = 2
#: Calibration files kept (~317 KB each); the least recently used beyond this are deleted.
MAX_FILES = 64


class Calibration:
    """Class moments per style table. Thread-safe; at most one calibration computes at a time."""

    def __init__(
        self, stages: Stages, model_sha256: str, directory: Path, *, background: bool = True
    ) -> None:
        self._stages = stages
        self._background_enabled = background
        self.model_sha256 = model_sha256
        self.directory = directory
        self._memory: OrderedDict[str, ClassMoments] = OrderedDict()
        self._pending: set[str] = set()
        self._lock = threading.Lock()
        self._compute_lock = threading.Lock()

    def key(self, style: StyleTable) -> str:
        """What the statistics depend on: the model, koe's code, the calibration set and the voice."""
        digest = hashlib.sha256()
        recipe = [f"{phonemes}@{speed}" for phonemes, speed in CALIBRATION_SET]
        for part in (self.model_sha256, __version__, str(CALIBRATION_VERSION), *recipe):
            digest.update(part.encode())
            digest.update(b"\0")
        digest.update(np.ascontiguousarray(style, dtype=np.float32).tobytes())
        return digest.hexdigest()

    def lookup(self, style: StyleTable) -> ClassMoments | None:
        """The voice's moments from memory or disk, or ``None`` when it has not been calibrated."""
        key = self.key(style)
        with self._lock:
            cached = self._memory.get(key)
        if cached is not None:
            return cached
        loaded = self._load(key)
        if loaded is not None:
            self._remember(key, loaded)
        return loaded

    def calibrate(self, style: StyleTable) -> ClassMoments:
        """Moments for ``style``, computing and caching them now if needed (seconds of CPU)."""
        found = self.lookup(style)
        if found is not None:
            return found
        with self._compute_lock:
            found = self.lookup(style)  # another thread may have finished it meanwhile
            if found is not None:
                return found
            key = self.key(style)
            started = time.perf_counter()
            moments = self._compute(style)
            logger.info("calibrated a voice in %.1f s (%s…)", time.perf_counter() - started, key[:12])
            self._remember(key, moments)
            self._store(key, moments)
            return moments

    def calibrate_in_background(self, style: StyleTable) -> None:
        """Start calibrating ``style`` on a daemon thread unless that is under way or disabled."""
        key = self.key(style)
        with self._lock:
            if not self._background_enabled or key in self._pending or len(self._pending) >= MAX_PENDING:
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

    def _compute(self, style: StyleTable) -> ClassMoments:
        takes = []
        for phonemes, speed in CALIBRATION_SET:
            ids = tokenize(phonemes)
            row = style[len(ids) - 1]
            takes.append((self._stages.run_front(ids, row, speed), row))
        totals = self._stages.class_sums(takes)
        try:
            moments = ClassMoments.from_sums(*([norm[part] for norm in totals] for part in range(3)))
        except ValueError as exc:
            raise SynthesisError(f"calibration failed: {exc}") from exc
        problem = self._problem(moments)
        if problem:
            raise SynthesisError(f"calibration produced unusable moments: {problem}")
        return moments

    def _problem(self, moments: ClassMoments) -> str | None:
        """Why a voice's moments cannot be used, or ``None``."""
        norms = self._stages.norms
        if len(moments.first) != len(norms) or len(moments.second) != len(norms):
            return f"{len(moments.first)} norms, expected {len(norms)}"
        for norm, first, second in zip(norms, moments.first, moments.second, strict=True):
            name = self._stages.statistic_names[norm.mean_index]
            channels = self._stages.channels[norm.mean_index]
            if first.ndim != 2 or first.shape[0] != 2 or first.shape != second.shape:
                return f"{name}: moments of shapes {first.shape} and {second.shape}, expected (2, C)"
            if channels is not None and first.shape[1] != channels:
                return f"{name}: {first.shape[1]} channels, the model has {channels}"
            if not (np.isfinite(first).all() and np.isfinite(second).all()):
                return f"{name} has non-finite moments"
            if (second - first * first < -1e-3 * np.maximum(second, 1.0)).any():
                return f"{name}: a mean square below the squared mean (a negative variance)"
        return None

    def _path(self, key: str) -> Path:
        return self.directory / f"{key}.npz"

    def _load(self, key: str) -> ClassMoments | None:
        path = self._path(key)
        if not path.is_file():
            return None
        count = len(self._stages.norms)
        with contextlib.suppress(OSError):  # a read-only cache is still read
            os.utime(path)  # recently used: kept when the directory is pruned
        try:
            with path.open("rb") as handle, np.load(handle, allow_pickle=False) as archive:
                names = tuple(str(name) for name in archive["names"])
                first = tuple(archive[f"first_{index}"] for index in range(count))
                second = tuple(archive[f"second_{index}"] for index in range(count))
        except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
            logger.warning("ignoring unreadable calibration file %s: %s", path, exc)
            return None
        moments = ClassMoments(first, second)
        problem = (
            "names differ from the model's" if names != self._stages.statistic_names else None
        ) or self._problem(moments)
        if problem:
            logger.warning("ignoring calibration file %s: %s", path, problem)
            return None
        return moments

    def _store(self, key: str, moments: ClassMoments) -> None:
        path = self._path(key)
        partial = partial_of(path)
        arrays = {f"first_{index}": value for index, value in enumerate(moments.first)}
        arrays |= {f"second_{index}": value for index, value in enumerate(moments.second)}
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            np.savez(partial, names=np.array(self._stages.statistic_names), **arrays)  # type: ignore[arg-type]
            partial.replace(path)
            prune_to_used_last(self.directory, ".npz", MAX_FILES)
        except OSError as exc:  # a read-only cache costs a recalibration per process, nothing more
            logger.warning("could not cache calibration in %s: %s", self.directory, exc)

    def _remember(self, key: str, moments: ClassMoments) -> None:
        with self._lock:
            self._memory[key] = moments
            self._memory.move_to_end(key)
            while len(self._memory) > _MAX_IN_MEMORY:
                self._memory.popitem(last=False)
