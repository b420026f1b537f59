"""Cold start: a fresh process's ``koe say`` and ``koe serve`` → ``/ping`` 200, against kokoro-onnx's own
cold load-and-speak of the same sentence, each with its peak resident memory; and where the load's time goes.

Every run is a new Python process (nothing is warm but the OS page cache, as for a user's second command):
``koe say TEXT -o FILE`` timed from spawn to exit; ``koe serve`` from spawn to the first ``/ping`` 200;
kokoro-onnx from spawn to its WAV written, on the same int8 model and voice table, written to disk first
(kokoro-onnx takes paths). Peak RSS is the child's ``ru_maxrss`` (say, kokoro-onnx) or ``VmHWM`` once ready
(serve). Kinds are interleaved within each repeat so background load hits them alike. What the first request
after a container's start hears: :mod:`koe_bench.firstrequest`.

The step profile (:func:`profile_steps`) runs ``koe say`` or ``koe serve`` in a child with timers wrapped
around the load's known steps (:data:`STEPS`; those absent in this version are skipped), so the JSON shows
each step's wall time and when it started; steps that overlap (threads) are shown as they ran.

Run: ``python -m koe_bench.coldstart [--repeats N] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from koe.errors import ConfigError, UpstreamError
from koe_bench import firstrequest
from koe_bench.children import THIS_KOE, Koe, python, reap, serving, torch_installed, until_ready, vm_hwm_mb
from koe_bench.resultfile import emit

SENTENCE = "Hello there. This is koe."
VOICE = "af_heart"
#: What makes a folder a koe source tree: a baseline's step profile runs this module against the koe there
#: (``PYTHONPATH`` puts it before the installed one).
_KOE_SOURCE = Path("koe/cli.py")
#: Where the load's time goes: ``module:attribute`` paths timed by the step profile (missing ones skipped).
STEPS = (
    "koe.engine.assets:packaged_model_bytes",
    "onnxruntime:InferenceSession.__init__",
    "onnx:load_from_string",
    "koe.engine.onnx.engine:OnnxEngine._session",
    "koe.engine.onnx.stages:derive",
    "koe.engine.onnx.stages:run_probe",
    "koe.engine.onnx.stages:verify",
    "koe.engine.onnx.stages:load_stages",
    "koe.engine.onnx.decoder:StreamingDecoder.load",
    "koe.engine.onnx.engine:OnnxEngine.__init__",
    "koe.engine.voices:VoiceBank.load",
    "koe.g2p.misaki:_offline_g2p",
    "koe.g2p.misaki:_spacy_pipeline",
    "koe.g2p.misaki:MisakiG2P.__init__",
    "koe.pipeline.speech:_build_g2p",
    "koe.pipeline.speech:Speech.load",
    "koe.pipeline.speech:Speech.synthesize",
    "koe.server.runtime:Runtime._warm_up",
)
#: Imported before the command runs, so their import time is a step of its own: what ``koe`` imports before
#: loading anything. spaCy and misaki are not among them: the load imports them (``_offline_g2p``).
_HEAVY_MODULES = ("numpy", "onnxruntime", "onnx", "koe.pipeline.speech", "koe.app")


@dataclass(frozen=True, slots=True)
class ColdRun:
    """One fresh process: seconds from spawn to done (exit, or ready) and its peak resident memory."""

    kind: str
    wall_s: float
    peak_rss_mb: float


def _timed_child(kind: str, command: list[str], env: dict[str, str] | None = None) -> ColdRun:
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert process.stderr is not None
    errors = process.stderr.read()  # drained while it runs, so a chatty child never blocks on the pipe
    code, peak_mb = reap(process)
    wall_s = time.perf_counter() - started
    if code != 0:
        raise UpstreamError(f"{kind} exited with {code}: {errors.decode(errors='replace')[-2000:]}")
    return ColdRun(kind, wall_s, peak_mb)


def say_cold(out: Path, text: str = SENTENCE, koe: Koe = THIS_KOE) -> ColdRun:
    """``koe say TEXT -o out`` in a fresh process."""
    command = [*koe.command(), "say", text, "-v", VOICE, "-o", str(out)]
    return _timed_child(koe.kind("koe_say"), command, koe.env())


def serve_cold(koe: Koe = THIS_KOE) -> ColdRun:
    """``koe serve`` in a fresh process, until ``/ping`` answers 200 (then stopped)."""
    started = time.perf_counter()
    with serving([*koe.command(), "serve"], koe.env()) as (process, url):
        ready_s = until_ready(process, url, started)
        return ColdRun(koe.kind("koe_serve_ready"), ready_s, vm_hwm_mb(process.pid))


_KOKORO_ONNX_SPEAK = """
import sys
import soundfile
from kokoro_onnx import Kokoro
model, voices, text, voice, out = sys.argv[1:]
audio, rate = Kokoro(model, voices).create(text, voice=voice, lang="en-us")
soundfile.write(out, audio, rate)
"""


def prepare_kokoro_onnx(workdir: Path) -> tuple[Path, Path]:
    """The joined int8 model and the voice table as files, as a kokoro-onnx user has them on disk."""
    import numpy as np

    from koe.engine.assets import install_voices, packaged_model_bytes
    from koe.engine.voices import VoiceBank

    model, voices = workdir / "kokoro-v1.0.int8.onnx", workdir / "voices.npz"
    model.write_bytes(packaged_model_bytes())
    table = VoiceBank.load(install_voices([VOICE]), (VOICE,)).resolve(VOICE)
    np.savez(voices, **{VOICE: table})  # type: ignore[arg-type]  # numpy's stub types **kwds as its flags
    return model, voices


def kokoro_onnx_cold(model: Path, voices: Path, out: Path, text: str = SENTENCE) -> ColdRun:
    """kokoro-onnx's own cold load-and-speak of ``text`` (its espeak G2P, its session) in a fresh process."""
    command = [*python(), "-c", _KOKORO_ONNX_SPEAK, str(model), str(voices), text, VOICE, str(out)]
    return _timed_child("kokoro_onnx_say", command)


def cold_runs(
    repeats: int,
    workdir: Path,
    text: str = SENTENCE,
    baseline: Path | None = None,
    step: Callable[[], None] = lambda: None,
) -> dict[str, list[ColdRun]]:
    """``repeats`` rounds of each kind, the order rotating from round to round: koe (and the ``baseline``
    source tree, if given), each also without torch where torch is installed, each's first start (as in a
    fresh container: no torch, nothing in its cache but what ``koe install`` leaves), and kokoro-onnx."""
    model, voices = prepare_kokoro_onnx(workdir)
    sources = [None] + ([baseline] if baseline is not None else [])
    variants = [Koe(src) for src in sources]
    if torch_installed():
        variants += [Koe(src, without_torch=True) for src in sources]
    variants += [Koe(src, torch_installed(), workdir) for src in sources]
    kinds: dict[str, Callable[[], ColdRun]] = {
        "kokoro_onnx_say": lambda: kokoro_onnx_cold(model, voices, workdir / "kokoro.wav", text)
    }
    for koe in variants:
        kinds[koe.kind("koe_say")] = functools.partial(say_cold, workdir / "koe.wav", text, koe)
        kinds[koe.kind("koe_serve_ready")] = functools.partial(serve_cold, koe)
    names = list(kinds)
    runs: dict[str, list[ColdRun]] = {name: [] for name in names}
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            runs[name].append(kinds[name]())
            step()
    return runs


def summarize_cold(runs: dict[str, list[ColdRun]]) -> dict[str, Any]:
    """Medians per kind, every run, and koe's ratios to kokoro-onnx's cold load-and-speak."""
    kinds: dict[str, dict[str, Any]] = {
        name: {
            "wall_s": statistics.median(r.wall_s for r in rs),
            "peak_rss_mb": statistics.median(r.peak_rss_mb for r in rs),
            "runs": [asdict(r) for r in rs],
        }
        for name, rs in runs.items()
    }
    peer = kinds["kokoro_onnx_say"]["wall_s"]
    return {
        "sentence": SENTENCE,
        "kinds": kinds,
        "ratios": {
            f"{name}_over_kokoro_onnx": kind["wall_s"] / peer
            for name, kind in kinds.items()
            if name != "kokoro_onnx_say"
        },
    }


# --- the step profile ---------------------------------------------------------------------------------------


class _StepTimer:
    """Wraps the functions named in :data:`STEPS`; records each call's start (since the timer began) and
    wall time, from any thread."""

    def __init__(self) -> None:
        self.origin = time.perf_counter()
        self.calls: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def wrap(self, path: str) -> bool:
        module_name, _, attribute = path.partition(":")
        try:
            owner: Any = importlib.import_module(module_name)
        except ModuleNotFoundError:
            return False
        *parents, name = attribute.split(".")
        for parent in parents:
            owner = getattr(owner, parent, None)
        raw = owner.__dict__.get(name) if owner is not None and hasattr(owner, "__dict__") else None
        if raw is None:
            return False
        if isinstance(raw, classmethod):
            setattr(owner, name, classmethod(self._timed(path, raw.__func__)))
        else:
            setattr(owner, name, self._timed(path, raw))
        return True

    def _timed(self, path: str, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                ended = time.perf_counter()
                with self._lock:
                    self.calls.append(
                        {
                            "step": path,
                            "thread": threading.current_thread().name,
                            "start_s": started - self.origin,
                            "wall_s": ended - started,
                        }
                    )

        return timed


def _profiled_main(argv: list[str], out: Path) -> int:
    """In the child: time the imports, wrap the steps, run ``koe ARGV``, write the calls to ``out``."""
    timer = _StepTimer()
    for module in _HEAVY_MODULES:
        started = time.perf_counter()
        importlib.import_module(module)
        timer.calls.append(
            {"step": f"import {module}", "thread": "MainThread", "start_s": started - timer.origin,
             "wall_s": time.perf_counter() - started}
        )  # fmt: skip
    wrapped = [path for path in STEPS if timer.wrap(path)]
    from koe.cli import main

    # uvicorn re-raises the SIGTERM it stopped on once it has shut down: without a handler of our own the
    # process would die there, before writing its profile
    signal.signal(signal.SIGTERM, lambda _signal, _frame: None)

    code = main(argv)
    total_s = time.perf_counter() - timer.origin
    out.write_text(json.dumps({"argv": argv, "wrapped": wrapped, "total_s": total_s, "calls": timer.calls}))
    return code


def profile_steps(kind: str, workdir: Path, koe: Koe = THIS_KOE) -> dict[str, Any]:
    """The step profile of a cold ``koe say`` (``kind="say"``) or ``koe serve`` until ready (``"serve"``);
    with a baseline source tree, this module runs against the koe there."""
    out = workdir / f"steps-{kind}.json"
    child = [*python(), "-m", "koe_bench.coldstart", "--profile", str(out), "--"]
    if kind == "say":
        command = [*child, "say", SENTENCE, "-v", VOICE, "-o", str(workdir / "p.wav")]
        _timed_child(koe.kind("koe_say_profiled"), command, koe.env())
        said: dict[str, Any] = json.loads(out.read_text())
        return said
    started = time.perf_counter()
    with serving([*child, "serve"], koe.env()) as (process, url):
        ready_s = until_ready(process, url, started)
    served: dict[str, Any] = json.loads(out.read_text())
    return {**served, "ready_s": ready_s}


def run(repeats: int, baseline: Path | None = None) -> dict[str, Any]:
    """Every cold kind ``repeats`` times, the first request after a first start (:mod:`firstrequest`)
    ``repeats`` times, then one step profile of each command (of the baseline too).

    Raises:
        ConfigError: the baseline is no koe source tree (checked first).
    """
    from koe import __version__

    if baseline is not None and not (baseline / _KOE_SOURCE).is_file():
        raise ConfigError(f"--baseline-src {baseline}: expected a koe src/ holding {_KOE_SOURCE}")

    load_avg = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="koe-cold-") as scratch:
        workdir = Path(scratch)
        report = summarize_cold(cold_runs(repeats, workdir, baseline=baseline))
        report["first_requests"] = firstrequest.summarize(firstrequest.runs(repeats, workdir, baseline))
        variants = [Koe()] + ([Koe(baseline)] if baseline is not None else [])
        report["steps"] = {
            koe.kind(kind): profile_steps(kind, workdir, koe) for koe in variants for kind in ("say", "serve")
        }
    report["koe_version"] = __version__
    report["baseline_src"] = None if baseline is None else str(baseline)
    report["repeats"] = repeats
    report["cpus"] = os.cpu_count()
    report["load_avg_1m"] = load_avg
    report["load_avg_1m_end"] = os.getloadavg()[0]
    return report


def kinds_per_round(baseline: bool = False) -> int:
    """Fresh processes of one round: kokoro-onnx, and koe's say and serve per variant."""
    variants = (2 if baseline else 1) * (3 if torch_installed() else 2)
    return 1 + 2 * variants


def scenario(repeats: int, step: Callable[[], None]) -> dict[str, Any]:
    """``koe bench``'s cold-start scenario: the cold kinds without the step profile."""
    load_avg = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="koe-cold-") as scratch:
        report = summarize_cold(cold_runs(repeats, Path(scratch), step=step))
    return {**report, "repeats": repeats, "load_avg_1m": load_avg, "load_avg_1m_end": os.getloadavg()[0]}


#: The goal for this machine: koe ready to speak within this factor of kokoro-onnx's cold load-and-speak.
TARGET_RATIO = 1.5


def targets(scenario: Mapping[str, Any]) -> dict[str, Any]:
    """koe's cold say and time to ready against :data:`TARGET_RATIO` × kokoro-onnx's, for the report."""
    found = {}
    for name in ("koe_say", "koe_serve_ready"):
        ratio = scenario["ratios"][f"{name}_over_kokoro_onnx"]
        found[f"cold_{name}_over_kokoro_onnx"] = {
            "target": TARGET_RATIO, "measured": ratio, "met": ratio <= TARGET_RATIO
        }  # fmt: skip
    return found


def table(scenario: Mapping[str, Any]) -> tuple[str, tuple[str, ...], list[tuple[str, ...]], list[str]]:
    """The scenario as a report section: title, columns, rows, notes."""
    peer = scenario["kinds"]["kokoro_onnx_say"]["wall_s"]
    rows: list[tuple[str, ...]] = [
        (name, f"{kind['wall_s']:.2f}", f"{kind['wall_s'] / peer:.2f}", f"{kind['peak_rss_mb']:.0f}")
        for name, kind in scenario["kinds"].items()
    ]
    notes = [
        f'a fresh process each, medians of {scenario["repeats"]}; "{scenario["sentence"]}"; goal: koe within '
        f"{TARGET_RATIO:g}× of kokoro-onnx; `_without_torch`: torch made unimportable, as in the CPU image",
    ]
    title = "9 · cold start: `koe say`, `koe serve` → /ping 200, kokoro-onnx's own load-and-speak"
    return title, ("process", "wall s", "× kokoro-onnx", "peak RSS MB"), rows, notes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--baseline-src", type=Path, help="another koe's src/ (with this module) to run beside this one"
    )
    parser.add_argument("--profile", type=Path, help=argparse.SUPPRESS)  # the step profile's child
    args, rest = parser.parse_known_args()
    if args.profile is not None:
        return _profiled_main([a for a in rest if a != "--"], args.profile)
    report = run(args.repeats, args.baseline_src)
    emit(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
