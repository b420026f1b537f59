"""misaki's pronouncing dictionaries as its lexicon holds them, kept in koe's cache once grown.

misaki ships each dictionary as JSON and grows it at every start (a capitalized twin of every lowercase
word): two dictionaries per accent, a large share of the G2P's build, holding the GIL beside the engine's
load. The grown dictionary depends only on the JSON's bytes and misaki's version, so it is kept under a key
of both as ``marshal`` data (the format of Python's own bytecode cache, read faster than the growing): a
later start reads that instead. A missing, damaged or unwritable file only costs the growing again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import marshal
import os
from collections.abc import Callable
from contextlib import suppress
from importlib.metadata import version
from importlib.resources import files
from pathlib import Path
from typing import Any

from koe.engine.assets import cache_dir

logger = logging.getLogger(__name__)

Grow = Callable[[dict[str, Any]], dict[str, Any]]


def grown_dictionary(name: str, grow: Grow, directory: Path | None = None) -> dict[str, Any]:
    """misaki's ``misaki.data`` dictionary ``name`` (``us_gold.json``...) grown by ``grow``; kept in
    ``directory`` (default: ``<cache>/g2p``)."""
    raw = files("misaki.data").joinpath(name).read_bytes()
    key = hashlib.sha256(raw + version("misaki").encode()).hexdigest()
    kept = (directory or cache_dir() / "g2p") / f"{key}.marshal"
    try:
        words = marshal.loads(kept.read_bytes())
    except FileNotFoundError:
        pass
    except (OSError, EOFError, ValueError, TypeError) as exc:
        logger.info("growing %s again: its kept copy is not readable (%s)", name, exc)
    else:
        if isinstance(words, dict):
            return words
    words = grow(json.loads(raw.decode("utf-8")))
    _keep(kept, words)
    return words


def _keep(path: Path, words: dict[str, Any]) -> None:
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial.write_bytes(marshal.dumps(words))
        partial.replace(path)
    except (OSError, ValueError) as exc:  # a read-only cache (an image); ValueError: not marshal-able
        logger.info("misaki's grown dictionaries are not kept: %s", exc)
        with suppress(OSError):
            partial.unlink(missing_ok=True)
