"""``koe bench`` and ``koe soak``: the measuring subcommands, which :mod:`koe.cli` registers through the
``koe.commands`` entry points (bench/pyproject.toml).

``koe --help`` imports this module: its handlers import the benchmark modules (and through them the model)
only when run.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console

from koe.errors import KoeError

_stderr = Console(stderr=True)
#: Piped output gets wide tables rather than 80 columns of wrapped cells.
_PIPED_WIDTH = 120
#: Scenarios that ``koe bench --only`` runs alone, each writing a report of its own.
ALONE = ("reading", "languages", "first-audio", "agent-vs-stream", "wyoming", "capacity")


def register_bench(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "bench", help="time to first audio, gaps, barge-in and capacity: koe vs its baselines"
    )
    parser.add_argument("--quick", action="store_true", help="short smoke run (short text, 1 repeat, N ≤ 2)")
    parser.add_argument("--url", help="a running koe server (default: start one in this process)")
    parser.add_argument("-o", "--out", type=Path, default=Path("bench-results"), help="JSON and PNG folder")
    parser.add_argument("--repeats", type=int, help="runs per strategy (default 5, quick 1)")
    parser.add_argument("--max-sessions", type=int, help="largest capacity level (default 8, quick 2)")
    parser.add_argument("--tokens-per-s", type=float, help="simulated LLM rate (default 30)")
    parser.add_argument(
        "--first-token-delay", type=float, help="simulated LLM first-token delay (default 0.3 s)"
    )
    parser.add_argument("--ttfa-threshold", type=float, help="capacity: most s from first sentence to audio")
    parser.add_argument(
        "--hog",
        type=int,
        default=0,
        help="capacity: this many busy processes (one core each) beside the ladder (default 0)",
    )
    parser.add_argument(
        "--vcpu-price",
        type=float,
        help="capacity: US$ per vCPU-hour for the cost of a listener-hour (default 0.0446, an AWS c7i.large)",
    )
    parser.add_argument(
        "--engine",
        choices=["onnx", "torch"],
        default="onnx",
        help="torch: only the PyTorch engine's capacity ladder, batching on and off (docs/deploy.md)",
    )
    parser.add_argument("--device", help="with --engine torch: cpu, cuda or cuda:N (default cuda)")
    parser.add_argument(
        "--only",
        choices=ALONE,
        help="one scenario alone: reading (the LLM-English corpus, heard by ASR), languages (streamed ja/es"
        " answers vs en), first-audio (whole and streamed texts against the peer servers), agent-vs-stream"
        " (the agent's read-aloud against /v1/stream, same text and pace; default pace 20 tokens/s), wyoming"
        " (koe's Wyoming server against wyoming-piper), capacity (the ladder of concurrent streamed answers"
        " alone: capacity.json)",
    )
    parser.add_argument(
        "--peer-python",
        type=Path,
        help="the interpreter of fastkokoro's environment, for the first-audio scenario (default "
        ".venv-peers/bin/python, made by `make bench-peers`; missing, that peer is left out)",
    )
    parser.add_argument(
        "--piper-python",
        type=Path,
        help="the interpreter of wyoming-piper's environment, for the wyoming scenario (default "
        ".venv-wyoming-piper/bin/python, made by `make bench-peers`; missing, that peer is left out)",
    )
    parser.set_defaults(handler=_run_bench)


def _run_bench(args: argparse.Namespace) -> int:
    if args.engine == "torch":
        if args.only is not None:
            raise KoeError("--only goes with the ONNX benchmark; --engine torch runs its own ladder")
        return _run_gpu_bench(args)
    if args.device is not None:
        raise KoeError("--device goes with --engine torch (the ONNX benchmark runs on the CPU)")
    if args.hog and args.only not in (None, "capacity"):
        raise KoeError(
            f"--hog goes with the capacity ladder (--only capacity or a full run), got --only {args.only}"
        )
    from koe.agent.replay import ReplayPace
    from koe_bench import report
    from koe_bench.config import BenchConfig
    from koe_bench.run import require_extras, run

    pace = None
    if args.tokens_per_s is not None or args.first_token_delay is not None:
        default = ReplayPace()
        pace = ReplayPace(
            args.tokens_per_s if args.tokens_per_s is not None else default.tokens_per_s,
            args.first_token_delay if args.first_token_delay is not None else default.first_token_delay_s,
        )
    config = BenchConfig.for_run(
        args.out,
        quick=args.quick,
        url=args.url,
        pace=pace,
        repeats=args.repeats,
        max_sessions=args.max_sessions,
        ttfa_threshold_s=args.ttfa_threshold,
        peer_python=args.peer_python,
        piper_python=args.piper_python,
        only=args.only,
        hog=args.hog,
        vcpu_price=args.vcpu_price,
    )
    if config.only == "languages":
        return _run_languages(config)
    command = " ".join(["koe", *sys.argv[1:]])
    console = _console()
    if config.only == "reading":
        from koe_bench.reading import run_alone

        require_extras()
        alone = run_alone(config, command)
        _stderr.print("wrote " + ", ".join(str(p) for p in report.write_reading(alone, config.out).values()))
        report.print_sections([report.reading_section(alone["reading"])], console)
        return 0
    if config.only == "first-audio":
        return _run_first_audio(config)
    if config.only == "agent-vs-stream":
        return _run_agent_vs_stream(config, pace)
    if config.only == "wyoming":
        return _run_wyoming(config)
    if config.only == "capacity":
        return _run_capacity(config)
    results, traces = run(config, command)
    paths = report.write(results, traces, config.out)
    report.print_tables(results, console)
    _stderr.print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


def _run_gpu_bench(args: argparse.Namespace) -> int:
    from koe_bench import gpu

    config = gpu.GpuBenchConfig.for_run(
        args.out, args.device or "cuda", quick=args.quick, max_sessions=args.max_sessions
    )
    if args.ttfa_threshold is not None:
        config = replace(config, threshold_s=args.ttfa_threshold)
    speech, settings = gpu.load(config)
    report = gpu.run(config, speech, settings, " ".join(["koe", *sys.argv[1:]]))
    paths = gpu.write(report, config.out)
    for mode, result in report["modes"].items():
        _stderr.print(
            f"{mode}: {result['max_sessions_ok'] or 0} sessions within {config.threshold_s * 1000:.0f} ms, "
            f"{result['audio_per_wall_s_at_max_ok'] or 0:.1f} audio-s/s there"
        )
    _stderr.print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 0


def _run_languages(config: Any) -> int:
    from koe_bench import languages

    results = languages.run_alone(config, " ".join(["koe", *sys.argv[1:]]))
    return _write_alone(config, results, languages.JSON_NAME, languages.table(results["languages"]))


def _run_first_audio(config: Any) -> int:
    from koe_bench import firstaudio

    results = firstaudio.run_alone(config, " ".join(["koe", *sys.argv[1:]]))
    return _write_alone(config, results, firstaudio.JSON_NAME, firstaudio.table(results))


def _run_agent_vs_stream(config: Any, pace: Any) -> int:
    """``pace`` from the command line, else the page's (:data:`koe_bench.agentstream.PACE`)."""
    from koe_bench import agentstream

    command = " ".join(["koe", *sys.argv[1:]])
    results = agentstream.run_alone(config, command, pace or agentstream.PACE)
    return _write_alone(config, results, agentstream.JSON_NAME, agentstream.table(results))


def _run_capacity(config: Any) -> int:
    from koe_bench import capacity, report

    results = capacity.run_alone(config, " ".join(["koe", *sys.argv[1:]]))
    section = report.capacity_section(results["capacity"])
    return _write_alone(
        config, results, capacity.JSON_NAME, (section.title, section.columns, section.rows, section.notes)
    )


def _run_wyoming(config: Any) -> int:
    from koe_bench import homeassistant

    results = homeassistant.run_alone(config, " ".join(["koe", *sys.argv[1:]]))
    return _write_alone(config, results, homeassistant.JSON_NAME, homeassistant.table(results))


def _write_alone(config: Any, results: dict[str, Any], name: str, table: tuple[Any, ...]) -> int:
    """One scenario run alone: its JSON in ``config.out``, its table on stdout."""
    import json

    from koe_bench import report

    config.out.mkdir(parents=True, exist_ok=True)
    path = config.out / name
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    report.print_sections([report.Section(*table)], _console())
    _stderr.print(f"wrote {path}")
    return 0


def _console() -> Console:
    return Console() if sys.stdout.isatty() else Console(width=_PIPED_WIDTH)


def register_soak(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "soak", help="mixed clients for minutes against a server; reports its memory growth and errors"
    )
    parser.add_argument("--minutes", type=float, default=10.0, help="how long the clients run (default 10)")
    parser.add_argument("--clients", type=int, default=3, help="concurrent clients (default 3)")
    parser.add_argument(
        "--hostile", type=int, default=0, help="concurrent hostile clients besides them (default 0)"
    )
    parser.add_argument("--url", help="a running koe server (default: start `koe serve` as a subprocess)")
    parser.add_argument("--pid", type=int, help="the process id of the server at --url, for its memory")
    parser.add_argument("-o", "--out", type=Path, help="also write the report as JSON here")
    parser.set_defaults(handler=_run_soak)


def _run_soak(args: argparse.Namespace) -> int:
    import asyncio
    import tempfile
    from contextlib import nullcontext

    from koe_bench.hostile import SERVER_ENV
    from koe_bench.soak import REFERENCE_ENV, rss_bytes, server_process, soak

    if (args.url is None) != (args.pid is None):
        raise KoeError("--url and --pid go together (the server's memory is read from its pid)")
    # hostile clients are paced for short deadlines: a server started here gets them (one at --url must
    # have been started with them)
    env = {**(SERVER_ENV if args.hostile else {}), **REFERENCE_ENV}
    # the server's own output goes to a file the soak checks at the end (no key, no forged line in it)
    log = Path(tempfile.mkdtemp(prefix="koe-soak-")) / "serve.log" if args.url is None else None
    with server_process(env, log) if log is not None else nullcontext((args.url, args.pid)) as (url, pid):
        _stderr.print(
            f"soaking {url} (pid {pid}) for {args.minutes:g} min with {args.clients} clients and "
            f"{args.hostile} hostile ones; the server's log: {log or 'not checked'}"
        )
        report = asyncio.run(
            soak(
                url,
                args.minutes * 60,
                lambda: rss_bytes(pid),
                clients=args.clients,
                hostile=args.hostile,
                server_env=env,
                log=log,
            )
        )
    print(report.summary())
    if args.out is not None:
        args.out.write_text(report.to_json())
    return 0 if report.passed else 1
