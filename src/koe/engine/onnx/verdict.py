"""The stage cut's verdict, remembered per model and machine: proven once, then trusted by its key.

Proving the cut (:func:`koe.engine.onnx.stages.verify`) decodes the probe through A→B, through the whole
graph and through the frozen vocoder: ~3 s of a cold start here. Whether A→B equals the whole graph depends
only on the model's bytes, koe's cut, the ONNX Runtime build and options that run them and the CPU whose
instructions its kernels pick, so once proven it is kept in koe's cache under a key of exactly those (the
model's sha256 among them: other bytes are another key, so they are proven afresh), with the sha256 of the
probe's A→B audio as the proof's evidence. A later load with the same key skips the probe altogether (its
first real decode is as fast as a second one: ONNX Runtime pays no first-run cost here, measured). A
missing, unreadable, malformed or foreign file, or a different key, is doubt, and doubt means the full
proof (and a fresh record). Only a proof is remembered: a graph that cannot be cut is found out again at
each load (quickly: its tensors are missing).
"""

from __future__ import annotations

import hashlib
import json
import logging
import platform
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import onnxruntime as ort

from koe import __version__
from koe.types import Audio

logger = logging.getLogger(__name__)

#: Bump when the cut (its tensors, its sessions, the probe) changes in a way koe's version does not show.
CUT_VERSION = 1
_SCHEMA = "koe-stage-cut/2"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_CPUINFO = Path("/proc/cpuinfo")
#: The lines of ``/proc/cpuinfo`` that name the instructions ONNX Runtime's kernels choose between.
_CPU_FEATURES = ("flags", "Features")


def cpu_identity() -> str:
    """The machine and its CPU's instruction-set flags (Linux), as one string for the key."""
    features = ""
    try:
        for line in _CPUINFO.read_text(encoding="utf-8", errors="replace").splitlines():
            field, _, value = line.partition(":")
            if field.strip() in _CPU_FEATURES:
                features = " ".join(sorted(value.split()))
                break
    except OSError:
        features = platform.processor()
    return f"{platform.machine()} {hashlib.sha256(features.encode()).hexdigest()}"


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
    cpu: str
    cut_version: int = CUT_VERSION

    @classmethod
    def of(
        cls, model_sha256: str, providers: list[str], graph_optimization: str, threads: int, probe: str
    ) -> VerdictKey:
        return cls(
            model_sha256, __version__, ort.__version__, tuple(providers), graph_optimization, threads, probe,
            cpu_identity(),
        )  # fmt: skip

    def fields(self) -> dict[str, object]:
        return {**asdict(self), "providers": list(self.providers)}

    @property
    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.fields(), sort_keys=True).encode()).hexdigest()


def audio_digest(audio: Audio) -> str:
    return hashlib.sha256(audio.tobytes()).hexdigest()


class Verdict:
    """The proof record of one cut: ``directory/<key digest>.json`` (``directory``: ``<cache>/stage-cut``)."""

    def __init__(self, directory: Path, key: VerdictKey) -> None:
        self.key = key
        self.path = directory / f"{key.digest}.json"

    def _record(self, probe_audio: Audio) -> dict[str, object]:
        return {"schema": _SCHEMA, "key": self.key.fields(), "probe_audio_sha256": audio_digest(probe_audio)}

    def proven(self) -> bool:
        """Whether this very cut was proven before (a well-formed record under its key); doubt: ``False``."""
        try:
            record = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return False
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            logger.warning("ignoring unreadable stage-cut verdict %s: %s", self.path, exc)
            return False
        evidence = record.get("probe_audio_sha256") if isinstance(record, dict) else None
        expected = {"schema": _SCHEMA, "key": self.key.fields(), "probe_audio_sha256": evidence}
        if record != expected or not isinstance(evidence, str) or not _SHA256.fullmatch(evidence):
            logger.warning(
                "stage-cut verdict %s does not match this model and machine: proving again", self.path
            )
            return False
        return True

    def remember(self, probe_audio: Audio) -> None:
        """Record the proof; a cache that cannot be written costs a proof per load, nothing more."""
        partial = self.path.with_suffix(".partial")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial.write_text(json.dumps(self._record(probe_audio), indent=2, sort_keys=True) + "\n")
            partial.replace(self.path)
        except OSError as exc:
            logger.warning("could not record the stage-cut verdict in %s: %s", self.path.parent, exc)
