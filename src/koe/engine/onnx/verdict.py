"""The stage cut's verdict, remembered per model: proven once, then trusted on that CPU by its key.

Proving the cut (:func:`koe.engine.onnx.stages.verify`) decodes the probe through A→B, through the whole
graph and through the frozen vocoder: seconds of a cold start. Whether A→B equals the whole graph depends
only on the model's bytes, koe's cut, the ONNX Runtime build and options that run them and the CPU whose
instructions its kernels pick, so once proven it is kept in koe's cache under a key of the first of those
(the model's sha256 among them: other bytes are another key, proven afresh), with the sha256 of the probe's
A→B audio and the CPUs it was proven on. A later load on one of those CPUs decodes no probe at all (its
first real decode is no slower than a second one: ONNX Runtime pays no first-run cost). On
another CPU (a container built on one machine and started on another) it decodes the probe through A→B and
compares digests: the same bytes mean the same stages, and that CPU is added. A missing, unreadable,
malformed or foreign file, a different key or a different digest is doubt, and doubt means the full proof
(and a fresh record). Only a proof is remembered: a graph that cannot be cut is found out again at each
load (quickly: its tensors are missing).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import onnxruntime as ort

from koe import __version__
from koe.machine import cpu_identity, partial_of
from koe.types import Audio

logger = logging.getLogger(__name__)

#: Bump when the cut (its tensors, its sessions, the probe) changes in a way koe's version does not show:
#: the stage graphs kept from earlier starts are found under the key it is part of.
CUT_VERSION = 1
_SCHEMA = "koe-stage-cut/2"
_FIELDS = {"schema", "key", "probe_audio_sha256", "cpus"}
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class VerdictKey:
    """What decides whether the cut reproduces the whole graph, and what the probe's audio is."""

    model_sha256: str
    koe: str
    onnxruntime: str
    providers: tuple[str, ...]
    graph_optimization: str
    threads: int
    probe: str
    cut_version: int = CUT_VERSION

    @classmethod
    def of(
        cls, model_sha256: str, providers: list[str], graph_optimization: str, threads: int, probe: str
    ) -> VerdictKey:
        return cls(
            model_sha256, __version__, ort.__version__, tuple(providers), graph_optimization, threads, probe
        )

    def fields(self) -> dict[str, object]:
        return {**asdict(self), "providers": list(self.providers)}

    @property
    def digest(self) -> str:
        """The record's file name: the key and the record's schema (koe trees of one version but different
        records never overwrite each other's)."""
        named = {**self.fields(), "schema": _SCHEMA}
        return hashlib.sha256(json.dumps(named, sort_keys=True).encode()).hexdigest()


def audio_digest(audio: Audio) -> str:
    return hashlib.sha256(audio.tobytes()).hexdigest()


class Verdict:
    """The proof record of one cut: ``directory/<key digest>.json`` (``directory``: ``<cache>/stage-cut``);
    ``cpu``: this machine's (:func:`cpu_identity` unless given)."""

    def __init__(self, directory: Path, key: VerdictKey, cpu: str | None = None) -> None:
        self.key = key
        self.cpu = cpu or cpu_identity()
        self.path = directory / f"{key.digest}.json"

    def _read(self) -> dict[str, Any] | None:
        """The record under this key if it is well-formed; ``None`` otherwise (logged unless absent)."""
        try:
            record = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            logger.warning("ignoring unreadable stage-cut verdict %s: %s", self.path, exc)
            return None
        if not (
            isinstance(record, dict)
            and set(record) == _FIELDS
            and record["schema"] == _SCHEMA
            and record["key"] == self.key.fields()
            and isinstance(record["probe_audio_sha256"], str)
            and _SHA256.fullmatch(record["probe_audio_sha256"])
            and isinstance(record["cpus"], list)
            and all(isinstance(cpu, str) for cpu in record["cpus"])
        ):
            logger.warning("stage-cut verdict %s does not match this model: proving again", self.path)
            return None
        return record

    def proven(self) -> bool:
        """Whether this very cut was proven on this CPU before: then no probe is needed. Doubt: ``False``."""
        record = self._read()
        return record is not None and self.cpu in record["cpus"]

    def confirms(self, probe_audio: Audio) -> bool:
        """Whether the cut was proven (on another CPU) with exactly this probe audio."""
        record = self._read()
        return record is not None and record["probe_audio_sha256"] == audio_digest(probe_audio)

    def remember(self, probe_audio: Audio) -> None:
        """Record the proof on this CPU (beside the others that gave the same probe audio); a cache that
        cannot be written costs a proof per load, nothing more."""
        digest = audio_digest(probe_audio)
        record = self._read()
        cpus = set(record["cpus"]) if record is not None and record["probe_audio_sha256"] == digest else set()
        fresh = {"schema": _SCHEMA, "key": self.key.fields(), "probe_audio_sha256": digest,
                 "cpus": sorted(cpus | {self.cpu})}  # fmt: skip
        partial = partial_of(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial.write_text(json.dumps(fresh, indent=2, sort_keys=True) + "\n")
            partial.replace(self.path)
        except OSError as exc:
            logger.warning("could not record the stage-cut verdict in %s: %s", self.path.parent, exc)
