"""The C allocator's setting for a process that runs the engine: a large block freed goes back to the system.

The engine's runs allocate and free large buffers of ever-changing sizes, from several threads: ONNX
Runtime's tensors (its CPU arena hands its free regions back to the C allocator after each run,
:func:`koe.engine.onnx.sessions.releasing`) and numpy's audio. glibc's malloc maps a block of 128 KiB or more
on its own and unmaps it when freed, but the first such block freed raises that threshold to its size (up
to 32 MiB), so every later block below it comes from a heap, where what is freed behind a block still in
use stays resident: RSS grows in steps with the largest buffers seen (docs/operations.md, "Memory").
:func:`release_freed_memory` fixes the threshold, which also stops it moving, so the large buffers are
mapped and unmapped each time.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os

logger = logging.getLogger(__name__)

#: glibc's ``mallopt`` parameter (``malloc.h``): the size from which a block is mapped on its own.
_M_MMAP_THRESHOLD = -3
#: Blocks this large or larger are mapped on their own and unmapped when freed: ONNX Runtime's tensors and
#: a segment's audio are; the many small objects of G2P and Python are not (below it, a block costs no
#: system call).
MMAP_THRESHOLD_BYTES = 1 << 20
#: The variable, and the tunable in ``GLIBC_TUNABLES``, by which a user chooses glibc's threshold.
_VARIABLE = "MALLOC_MMAP_THRESHOLD_"
_TUNABLE = "glibc.malloc.mmap_threshold"


@functools.cache
def release_freed_memory() -> bool:
    """Fix glibc's mmap threshold at :data:`MMAP_THRESHOLD_BYTES`, once per process; ``True`` when it was.

    Nothing is set on another C library, nor where the user chose a threshold (``MALLOC_MMAP_THRESHOLD_``,
    or ``glibc.malloc.mmap_threshold`` in ``GLIBC_TUNABLES``): the reason is logged at debug level.
    """
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):  # no confstr (Windows), or a name it lacks (macOS)
        libc = None
    if not libc or not libc.startswith("glibc"):
        logger.debug("the C library is %s, not glibc: its mmap threshold is left as it is", libc)
        return False
    if _VARIABLE in os.environ or _TUNABLE in os.environ.get("GLIBC_TUNABLES", ""):
        logger.debug("glibc's mmap threshold is the one the environment sets")
        return False
    if ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) != 1:
        logger.debug("glibc refused an mmap threshold of %d bytes", MMAP_THRESHOLD_BYTES)
        return False
    logger.debug("glibc's mmap threshold fixed at %d bytes", MMAP_THRESHOLD_BYTES)
    return True
