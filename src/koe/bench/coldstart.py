"""Cold start: a fresh process's ``koe say`` and ``koe serve`` → ``/ping`` 200, against kokoro-onnx's own
cold load-and-speak of the same sentence, each with its peak resident memory; and where the load's time goes.

Every run is a new Python process (nothing is warm but the OS page cache, as for a user's second command):
``koe say TEXT -o FILE`` timed from spawn to exit; ``koe serve`` from spawn to the first ``/ping`` 200;
kokoro-onnx from spawn to its WAV written, on the same int8 model and voice table, written to disk first
(kokoro-onnx takes paths). Peak RSS is the child's ``ru_maxrss`` (say, kokoro-onnx) or ``VmHWM`` once ready
(serve). Kinds are interleaved within each repeat so background load hits them alike.

The step profile (:func:`profile_steps`) runs ``koe say`` or ``koe serve`` in a child with timers wrapped
around the load's known steps (:data:`STEPS`; those absent in this version are skipped), so the JSON shows
each step's wall time and when it started; steps that overlap (threads) are shown as they ran.

Run: ``python -m koe.bench.coldstart [--repeats N] [--json out.json]``.
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from koe.bench.soak import free_port
from koe.errors import UpstreamError
from koe.server.background import LOOPBACK

SENTENCE = "Hello there. This is koe."
VOICE = "af_heart"
#: A cold ``koe serve`` on a loaded 2-core machine is ready in well under this.
READY_TIMEOUT_S = 300.0
_POLL_S = 0.02
_KIB = 1024
#: Where the load's time goes: ``module:attribute`` paths timed by the step profile (missing ones skipped).
STEPS = (
    "koe.engine.assets:packaged_model_bytes",
    "onnxruntime:InferenceSession.__init__",
    "onnx:load_from_string",
    "koe.engine.onnx.stages:derive",
    "koe.engine.onnx.stages:verify",
    "koe.engine.onnx.stages:load_stages",
    "koe.engine.onnx.decoder:StreamingDecoder.load",
    "koe.engine.onnx.engine:OnnxEngine.__init__",
    "koe.engine.voices:VoiceBank.load",
    "koe.g2p.misaki:_spacy_pipeline",
    "koe.g2p.misaki:MisakiG2P.__init__",
    "koe.pipeline.speech:Speech.load",
    "koe.pipeline.speech:Speech.synthesize",
    "koe.server.runtime:Runtime._warm_up",
)
#: Imported before the command runs, so their import time is a step of its own.
_HEAVY_MODULES = ("numpy", "onnxruntime", "onnx", "spacy", "misaki.en", "koe.pipeline.speech", "koe.app")


@dataclass(frozen=True, slots=True)
class ColdRun:
    """One fresh process: seconds from spawn to done (exit, or ready) and its peak resident memory."""

    kind: str
    wall_s: float
    peak_rss_mb: float


#: The CPU image installs no torch, but a venv with the GPU extra does, and spaCy's thinc then imports it
#: (~2.5 s here). A child started this way runs koe as that image would: torch is unimportable.
_WITHOUT_TORCH = "import sys; sys.modules['torch'] = None; from koe.cli import main; sys.exit(main())"


def _python() -> list[str]:
    return [sys.executable, "-X", "utf8"]


def _koe(without_torch: bool) -> list[str]:
    """The command that runs ``koe`` in a fresh interpreter (with torch made unimportable, if asked)."""
    return [*_python(), "-c", _WITHOUT_TORCH] if without_torch else [*_python(), "-m", "koe.cli"]


def torch_installed() -> bool:
    return importlib.util.find_spec("torch") is not None


def _wait(process: subprocess.Popen[bytes]) -> tuple[int, float]:
    """Reap ``process``: its exit code and its peak RSS in MB (from its own resource usage)."""
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, usage.ru_maxrss / _KIB


def _timed_child(kind: str, command: list[str]) -> ColdRun:
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert process.stderr is not None
    errors = process.stderr.read()  # drained while it runs, so a chatty child never blocks on the pipe
    code, peak_mb = _wait(process)
    wall_s = time.perf_counter() - started
    if code != 0:
        raise UpstreamError(f"{kind} exited with {code}: {errors.decode(errors='replace')[-2000:]}")
    return ColdRun(kind, wall_s, peak_mb)


def say_cold(out: Path, text: str = SENTENCE, *, without_torch: bool = False) -> ColdRun:
    """``koe say TEXT -o out`` in a fresh process."""
    command = [*_koe(without_torch), "say", text, "-v", VOICE, "-o", str(out)]
    return _timed_child("koe_say" + ("_without_torch" if without_torch else ""), command)


def _vm_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / _KIB
    raise UpstreamError(f"no VmHWM in /proc/{pid}/status")


@contextmanager
def _serving(command: list[str]) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = free_port()
    process = subprocess.Popen(
        [*command, "--host", LOOPBACK, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield process, f"http://{LOOPBACK}:{port}"
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _until_ready(process: subprocess.Popen[bytes], base_url: str, started: float) -> float:
    """Poll ``/ping`` until 200; the seconds since ``started``."""
    with httpx.Client(timeout=5.0) as client:
        while time.perf_counter() - started < READY_TIMEOUT_S:
            if process.poll() is not None:
                raise UpstreamError(f"koe serve exited with {process.returncode} before it was ready")
            try:
                if client.get(base_url + "/ping").status_code == 200:
                    return time.perf_counter() - started
            except httpx.TransportError:
                pass  # not listening yet
            time.sleep(_POLL_S)
    raise UpstreamError(f"koe serve was not ready within {READY_TIMEOUT_S:g} s")


def serve_cold(*, without_torch: bool = False) -> ColdRun:
    """``koe serve`` in a fresh process, until ``/ping`` answers 200 (then stopped)."""
    started = time.perf_counter()
    with _serving([*_koe(without_torch), "serve"]) as (process, url):
        ready_s = _until_ready(process, url, started)
        kind = "koe_serve_ready" + ("_without_torch" if without_torch else "")
        return ColdRun(kind, ready_s, _vm_hwm_mb(process.pid))


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
    command = [*_python(), "-c", _KOKORO_ONNX_SPEAK, str(model), str(voices), text, VOICE, str(out)]
    return _timed_child("kokoro_onnx_say", command)


def cold_runs(repeats: int, workdir: Path, text: str = SENTENCE) -> dict[str, list[ColdRun]]:
    """``repeats`` rounds of each kind, the order rotating from round to round."""
    model, voices = prepare_kokoro_onnx(workdir)
    kinds: dict[str, Callable[[], ColdRun]] = {
        "koe_say": lambda: say_cold(workdir / "koe.wav", text),
        "koe_serve_ready": serve_cold,
        "kokoro_onnx_say": lambda: kokoro_onnx_cold(model, voices, workdir / "kokoro.wav", text),
    }
    if torch_installed():
        kinds["koe_say_without_torch"] = lambda: say_cold(workdir / "koe.wav", text, without_torch=True)
        kinds["koe_serve_ready_without_torch"] = lambda: serve_cold(without_torch=True)
    names = list(kinds)
    runs: dict[str, list[ColdRun]] = {name: [] for name in names}
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            runs[name].append(kinds[name]())
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
            if name.startswith("koe_")
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


def profile_steps(kind: str, workdir: Path) -> dict[str, Any]:
    """The step profile of a cold ``koe say`` (``kind="say"``) or ``koe serve`` until ready (``"serve"``)."""
    out = workdir / f"steps-{kind}.json"
    child = [*_python(), "-m", "koe.bench.coldstart", "--profile", str(out), "--"]
    if kind == "say":
        _timed_child("koe_say_profiled", [*child, "say", SENTENCE, "-v", VOICE, "-o", str(workdir / "p.wav")])
    else:
        started = time.perf_counter()
        with _serving([*child, "serve"]) as (process, url):
            ready_s = _until_ready(process, url, started)
        profile: dict[str, Any] = json.loads(out.read_text())
        return {**profile, "ready_s": ready_s}
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def run(repeats: int) -> dict[str, Any]:
    from koe import __version__

    with tempfile.TemporaryDirectory(prefix="koe-cold-") as scratch:
        workdir = Path(scratch)
        report = summarize_cold(cold_runs(repeats, workdir))
        report["steps"] = {kind: profile_steps(kind, workdir) for kind in ("say", "serve")}
    report["koe_version"] = __version__
    report["cpus"] = os.cpu_count()
    report["load_avg_1m"] = os.getloadavg()[0]
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--profile", type=Path, help=argparse.SUPPRESS)  # the step profile's child
    args, rest = parser.parse_known_args()
    if args.profile is not None:
        return _profiled_main([a for a in rest if a != "--"], args.profile)
    report = run(args.repeats)
    text = json.dumps(report, indent=2)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
