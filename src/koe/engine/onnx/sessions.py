"""ONNX Runtime sessions built from graphs that ONNX Runtime optimized before, on this machine or another.

Most of a session's build is ONNX Runtime optimizing the graph, and a cold start builds three sessions. ONNX
Runtime can write the graph it optimized to a file; a session built from that file builds in about a third of
the time and runs the same kernels, so its output is the same to the bit (tested). What is kept is the graph
optimized up to :data:`KEPT_LEVEL`: it depends on the bytes it came from, the ONNX Runtime version, the level
and the providers, not on the CPU. The level above it ("all") adds layout optimizations that choose this CPU's
instructions (ONNX Runtime's docs: a graph saved with them needs compatible hardware), so a session at "all"
is built from the kept graph with them switched on, and makes them there: a small cost, as they change nothing
in this int8 model (the graphs saved at "extended" and at "all" hold the same nodes). So the graphs `koe
install` keeps while an image is built serve every container started from it, on any CPU of the same
architecture, and a container's first start optimizes nothing. They are kept in koe's cache under a key of all
of the above (``<cache>/optimized/<key>.onnx``), the last :data:`KEPT_GRAPHS` used only. Only CPU sessions are
kept: graphs optimized for other providers may hold kernels compiled for one device, which ONNX Runtime does
not promise to reload. Every run of these sessions takes :func:`releasing`'s options, so that a long decode's
memory is given back when it ends; CPU sessions share one arena (:func:`shared_cpu_arena`), from which each
tensor is allocated when it is needed rather than by a remembered layout (:data:`MEMORY_PATTERN`).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import platform
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any

import onnxruntime as ort

from koe.machine import prune_to_used_last

logger = logging.getLogger(__name__)

#: Optimized graphs kept in the cache (a model is four or five: the single graph and the stages), the
#: least recently used removed beyond it.
KEPT_GRAPHS = 12
_CPU_ONLY = ["CPUExecutionProvider"]
#: A partial graph this old is left by a process that stopped while writing it.
_ABANDONED_S = 3600.0
#: The highest optimization level whose graph ONNX Runtime makes alike on every CPU of an architecture.
KEPT_LEVEL = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED


#: ONNX Runtime's run option that frees, at the end of a run, the CPU arena's regions no tensor holds.
ARENA_SHRINKAGE = "memory.enable_memory_arena_shrinkage"


def releasing() -> ort.RunOptions:
    """Options for a run that hands the CPU arena's free regions back at its end. The arena otherwise keeps
    the largest run's intermediates for the life of the process: one 13-second utterance decoded whole
    left RSS 350-490 MB higher, and every longer segment raised it again. What a run gives back the next one
    allocates again, at a cost within the decodes' run-to-run noise (docs/operations.md, "Memory")."""
    options = ort.RunOptions()
    options.add_run_config_entry(ARENA_SHRINKAGE, "cpu:0")
    return options


#: :func:`releasing`'s options for the runs nobody stops, shared by every thread (nothing writes them).
RELEASING = releasing()

#: Whether sessions lay a run's tensors out by ONNX Runtime's memory pattern: off. With it, a run whose input
#: shapes were seen before (a segment length decoded again) takes one block laid out from the earlier run's
#: allocations, which holds about a fifth more at its peak than allocating each tensor from the arena when
#: it is needed and freeing it after its last use (a whole vocoder decode, before each resblock normalized its
#: input itself: 0.57 against 0.47 MB per frame, the same audio bit for bit, the same CPU); and every shape
#: seen is remembered with its pattern.
MEMORY_PATTERN = False

#: ONNX Runtime's graph optimizers every session runs without. Common-subexpression elimination finds nothing
#: to merge in Kokoro's export as it is, and would merge back the norms that
#: :func:`koe.engine.onnx.unshare.unshare_norms` copied to free memory.
DISABLED_OPTIMIZERS = ["CommonSubexpressionElimination"]

#: The session option by which a session allocates from the process's arena (:func:`shared_cpu_arena`).
USE_SHARED_ARENA = "session.use_env_allocators"
#: ONNX Runtime's ``kSameAsRequested``: the arena grows by what an allocation asks, not by regions that
#: double each time (its default), which would reserve up to twice what a long decode holds.
_EXTEND_AS_REQUESTED = 1


@functools.cache
def shared_cpu_arena() -> None:
    """Register, once per process, one CPU arena for every CPU session (they ask for it by
    :data:`USE_SHARED_ARENA`), grown by what is asked for. Each session otherwise has an arena of its own
    (the front, the vocoder and its windowed twin: three), each holding regions the others cannot use,
    and each grown in doubling regions. :func:`releasing` shrinks it at the end of every run as before."""
    cpu = ort.OrtMemoryInfo("Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT)
    ort.create_and_register_allocator(cpu, ort.OrtArenaCfg({"arena_extend_strategy": _EXTEND_AS_REQUESTED}))


class OptimizedSessions:
    """Sessions with ``threads`` intra-op threads on ``providers``, their graphs optimized at ``level``:
    from the optimized graph in ``directory`` when there is one (``None``: always optimize afresh).

    ``spin``: the intra-op threads spin between operators rather than sleep. Spinning saves a wake-up per
    operator, but a spinning thread holds its core: where more threads than cores run the engine (two
    workers of two threads on two cores), it takes the core from the other worker and from the event loop,
    whose ``/ping`` then waits for the scheduler (:attr:`koe.engine.registry.EngineOptions.spin`).
    """

    def __init__(
        self,
        threads: int,
        level: ort.GraphOptimizationLevel,
        providers: list[str],
        directory: Path | None = None,
        spin: bool = True,
    ) -> None:
        self.threads = threads
        self.spin = spin
        self.providers = providers
        self._level = level
        cacheable = providers == _CPU_ONLY and level != ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        self._directory = directory if cacheable else None
        self._kept_level = min(level, KEPT_LEVEL, key=int)
        #: what a session from the kept graph still applies: the levels above the kept one, if any
        self._above_kept = level != self._kept_level
        disabled = " ".join(DISABLED_OPTIMIZERS)
        self._runtime = f"{ort.__version__} {int(self._kept_level)} {platform.machine()} without {disabled}"

    def __call__(self, graph: bytes, keep: bool = True) -> ort.InferenceSession:
        """The session of ``graph``, found by its bytes; without ``keep``, a graph that was not kept is
        optimized and not written (writing it lengthens the start in proportion to its size: not worth it
        for a rare session)."""
        return self._session(hashlib.sha256(graph), lambda: graph, keep)

    def named(self, name: str, graph: Callable[[], bytes]) -> ort.InferenceSession:
        """The session of the graph ``name`` identifies (whoever names it vouches that the name changes when
        its bytes do); ``graph()`` makes the bytes, called only when no optimized graph is kept."""
        return self._session(hashlib.sha256(f"named {name}".encode()), graph)

    def _session(self, key: Any, graph: Callable[[], bytes], keep: bool = True) -> ort.InferenceSession:
        if self._directory is None:
            return self._optimized_now(graph())
        key.update(self._runtime.encode())
        path = self._directory / f"{key.hexdigest()}.onnx"
        if path.is_file():
            try:
                session = self._from_kept(path)
            except Exception as exc:  # a damaged file: optimize afresh, and replace it
                logger.warning("ignoring the optimized graph %s: %s", path, exc)
            else:
                with suppress(OSError):  # an image's cache is read-only: its graphs are never removed
                    os.utime(path)  # used: the last to be removed
                return session
        if not keep:
            return self._optimized_now(graph())
        return self._optimize(graph(), path)

    def _options(self, level: ort.GraphOptimizationLevel) -> ort.SessionOptions:
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if self.spin else "0")
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.enable_mem_pattern = MEMORY_PATTERN
        options.graph_optimization_level = level
        options.log_severity_level = 3  # warnings about unused initializers are noise for users
        if self.providers == _CPU_ONLY:  # another provider's sessions keep their own allocators
            shared_cpu_arena()
            options.add_session_config_entry(USE_SHARED_ARENA, "1")
        return options

    def _built(self, graph: bytes | str, options: ort.SessionOptions) -> ort.InferenceSession:
        """The session of ``graph`` (its bytes or its path), without :data:`DISABLED_OPTIMIZERS`."""
        return ort.InferenceSession(
            graph, options, providers=self.providers, disabled_optimizers=DISABLED_OPTIMIZERS
        )

    def _optimized_now(self, graph: bytes) -> ort.InferenceSession:
        """A session of ``graph`` optimized in memory, nothing kept."""
        return self._built(graph, self._options(self._level))

    def _from_kept(self, path: Path) -> ort.InferenceSession:
        level = self._level if self._above_kept else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        return self._built(str(path), self._options(level))

    def _optimize(self, data: bytes, path: Path) -> ort.InferenceSession:
        """A session optimized now, its graph written beside for the next start (a cache that cannot be
        written costs the optimization each time, nothing more). Above :data:`KEPT_LEVEL`, the session is
        then built from the graph written, as every later one will be (a little more, once per graph)."""
        partial = path.with_name(f"{path.stem}.{os.getpid()}.partial")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            logger.info("optimized graphs are not kept: %s", exc)  # a read-only cache (an image)
            return self._optimized_now(data)
        options = self._options(self._kept_level)
        options.optimized_model_filepath = str(partial)
        try:
            session = self._built(data, options)
        except Exception:  # the graph may not be writable (disk full...): a session is what counts
            partial.unlink(missing_ok=True)
            return self._optimized_now(data)
        try:
            partial.replace(path)
        except OSError as exc:
            logger.warning("could not keep the optimized graph %s: %s", path, exc)
            if not self._above_kept:
                return session
            return self._optimized_now(data)
        _prune(path.parent)
        return self._from_kept(path) if self._above_kept else session


def _prune(directory: Path) -> None:
    """Keep the :data:`KEPT_GRAPHS` graphs used last; leftovers of an interrupted write go too (once old
    enough not to be another process's write in progress)."""
    prune_to_used_last(directory, ".onnx", KEPT_GRAPHS)
    try:
        abandoned = [p for p in directory.glob("*.partial") if time.time() - p.stat().st_mtime > _ABANDONED_S]
        for stale in abandoned:
            stale.unlink(missing_ok=True)
    except OSError as exc:  # another process pruning at the same time
        logger.debug("pruning %s: %s", directory, exc)
