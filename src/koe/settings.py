"""The one schema of every ``KOE_*`` environment variable: each field typed, range-checked, defaulted and
described once, in three groups: the server's :class:`Settings`, the agent's :class:`AgentSettings`, and
:class:`ProcessSettings`, what every command reads.

Values come from the defaults below, then ``KOE_<FIELD>`` environment variables, then explicit overrides
(the CLI's flags), and are validated together, so a bad value fails at start-up naming its variable
(:mod:`koe.variables` reads them). The reference table in docs/operations.md is generated from these fields
(:func:`reference_markdown`), so the doc cannot name a variable the code does not read, nor miss one.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field
from pydantic.dataclasses import dataclass

from koe.errors import ConfigError
from koe.machine import usable_cores
from koe.variables import CONFIG, Group, accepted, fields_of, require, variable

#: The protocol caps one audio frame at 100 ms so that a cancel never waits behind more than that.
MAX_FRAME_S = 0.1
#: The segment cache's ceiling: 16 GiB of float32 audio is ~2 days of speech, far past any useful working set.
MAX_SEGMENT_CACHE_MB = 16_384
#: A batch window is a few milliseconds; past this it would cost first audio more than batching saves.
MAX_BATCH_WINDOW_S = 0.1
#: A shorter API key could be guessed; 16 characters is what ``secrets.token_urlsafe(12)`` gives.
MIN_API_KEY_CHARS = 16
#: Linux keeps a Unix socket's path in 108 bytes, the last one a NUL.
MAX_SOCKET_PATH_BYTES = 107
#: A synthesis call's threads where the cores allow: 2 run Kokoro about 1.6× as fast as 1 (docs/engine.md,
#: "Measured speed"); past 2, Kokoro's small operators are expected to gain little (no figure is kept).
SIZED_THREADS = 2
#: Workers on any machine: with one, a listener's long segment makes another's wait behind it (docs/api.md,
#: "Workers × threads"), so that even one core runs two calls, each slowed, rather than one after another.
MIN_WORKERS = 2
#: Admission's share of what the machine makes per second that listeners may need (``capacity_share``). The
#: machine's figure is its cores times the audio made per CPU-second (koe.scheduler.capacity), ~4 audio-s/s
#: on this 2-core machine; listeners need more than their real-time second each, since a turn's first
#: segments are short and cost the most per second of audio, and segments of several listeners queue
#: behind each other. On the capacity ladder two streamed answers at once (0.5 of the figure) play without
#: a gap (docs/benchmarks/capacity.json), and three (0.75 of it), let in, gapped (docs/benchmarks.md,
#: "Capacity"): 0.6 admits the second listener while the figure is above 3.3 and refuses the third while it
#: is below 5.
DEFAULT_CAPACITY_SHARE = 0.6
#: The lines around the generated table in docs/operations.md (:func:`with_reference`).
REFERENCE_START = "<!-- settings reference: generated from src/koe/settings.py by `koe settings --update` -->"
REFERENCE_END = "<!-- end of the settings reference -->"

Port = Annotated[int, Field(ge=0, le=65535)]
Count = Annotated[int, Field(ge=1)]
Seconds = Annotated[float, Field(gt=0)]


@dataclasses.dataclass(frozen=True, slots=True)
class Layout:
    """Synthesis calls at once (``workers``) and the intra-op threads of each, for the ``cores`` this process
    may use; ``given``: the settings among ``workers`` and ``threads_per_worker`` that were set, not sized."""

    workers: int
    threads: int
    cores: int
    given: tuple[str, ...] = ()

    @property
    def spin(self) -> bool:
        """Whether the engine's threads fit the cores, so that they may spin between operators rather than
        sleep (docs/engine.md, "Spinning")."""
        return self.workers * self.threads <= self.cores

    def __str__(self) -> str:
        """The layout and why, for the start banner: ``2 workers × 2 threads for 2 usable cores``."""
        text = f"{_count(self.workers, 'worker')} × {_count(self.threads, 'thread')}"
        cores = _count(self.cores, "usable core")
        if not self.given:
            return f"{text} for {cores}"
        return f"{text} on {cores} ({' and '.join(self.given)} as set)"


def layout_of(workers: int | None, threads: int | None, cores: int) -> Layout:
    """The sizing rule: a worker per core, at least :data:`MIN_WORKERS`, of :data:`SIZED_THREADS` threads
    each, or one thread a worker on one core; ``workers`` and ``threads`` win where given (not ``None``).

    Two threads a core, as in the 2 × 2 measured on 2 cores (docs/api.md, "Workers × threads"): a lone call
    gets two cores, and as many listeners as there are cores each have a call of their own, none waiting
    for a worker."""
    chosen = (("workers", workers), ("threads_per_worker", threads))
    return Layout(
        workers=max(MIN_WORKERS, cores) if workers is None else workers,
        threads=min(SIZED_THREADS, cores) if threads is None else threads,
        cores=cores,
        given=tuple(name for name, value in chosen if value is not None),
    )


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


@dataclass(frozen=True, config=CONFIG)
class Settings(Group):
    """The server (``koe serve``, ``koe wyoming``) and the engine every command loads. Sizes in bytes or
    characters, durations in seconds."""

    host: str = Field(
        "127.0.0.1",
        description="address to listen on (`--host`); the container images set `0.0.0.0` so that SageMaker "
        "reaches port 8080",
    )
    port: Port = Field(8080, description="HTTP port (`--port`; 0: one the system picks)")
    # engine
    engine: Literal["onnx", "torch"] = Field(
        "onnx", description="backend (`--engine`): `torch` is the GPU image's ([deploy.md](deploy.md))"
    )
    model_dir: Path | None = Field(
        None,
        description="directory with one `.onnx` and voices, instead of the packaged model (`--model-dir`)",
    )
    download: bool = Field(
        False, description="the fp32 model and voices from Hugging Face (`--download`; needs internet)"
    )
    # pronunciation (docs/pronunciation.md)
    lexicon: Path | None = Field(
        None,
        description="a JSON or TSV (`.tsv`) file of words said with given phonemes or respellings, per "
        "language, before G2P "
        "([pronunciation.md](pronunciation.md#lexicon))",
    )
    lazy_g2p: bool = Field(
        False,
        description="a language's G2P built on its first use, not before `/ping` is 200: a start takes "
        "less time and memory, and that first use holds every session for up to seconds (building holds "
        "Python's lock) ([Cold start](#cold-start))",
    )
    workers: Count | None = Field(
        None,
        description=f"synthesis calls at once (`--workers`); empty: one per usable core, at least "
        f"{MIN_WORKERS} ([Workers and threads](#workers-and-threads))",
    )
    threads_per_worker: Count | None = Field(
        None,
        description=f"ONNX Runtime intra-op threads of each worker (`--threads`); empty: {SIZED_THREADS}, 1 "
        "on a single usable core ([Workers and threads](#workers-and-threads))",
    )
    measure_after_ready: bool = Field(
        True,
        description="a start with nothing measured kept (a container's) times this machine's costs after "
        "`/ping` is 200, while idle, giving way to any request; false: before the 200 "
        "([Cold start](#cold-start))",
    )
    default_voice: str = Field(
        "af_heart", description="the voice of requests that name none; the one voice that must load"
    )
    device: str | None = Field(
        None, description="the torch engine's device: `cpu`, `cuda`, `cuda:N`; empty: CUDA where there is one"
    )
    torch_dtype: Literal["float32", "float16", "bfloat16"] = Field(
        "float32",
        description="the torch engine's number format: weights cast at load, passes under autocast, the "
        "harmonic source, norms and inverse STFT kept in float32; `float16` needs CUDA "
        "([engine.md](engine.md#half-precision))",
    )
    torch_buckets: bool | None = Field(
        None,
        description="the torch engine pads its passes to length buckets, warms each at start and replays "
        "CUDA graphs; false: every pass at its own shape, nothing warmed, no graphs; empty: on for CUDA, "
        "off on the CPU ([engine.md](engine.md#bucketed-shapes))",
    )
    batch_max_segments: Count = Field(
        16,
        description="an engine that shares passes (torch): whole segments of all sessions share engine "
        "calls, up to this many a call (1: every segment alone)",
    )
    batch_window_s: float = Field(
        0.005,
        ge=0,
        le=MAX_BATCH_WINDOW_S,
        description="how long a shared engine call waits for more segments ([api.md](api.md))",
    )
    windowed: bool = Field(
        False,
        description="every streamed segment decoded window by window, its audio sent in parts; off by "
        "default: windowed audio fails the spectral-balance quality gate "
        "([engine.md](engine.md#streaming-decoder))",
    )
    whole_decode_max_s: float | None = Field(
        None,
        gt=0,
        description="a segment not windowed and longer than this much audio is decoded in windows of at "
        "most this length within one step, with estimated statistics (the windowed decoder's audio), so "
        "that one vocoder run holds at most ~0.4 MB per 25 ms of it; `2` keeps two listeners' peak memory "
        "within 1.15× of ready; empty: every segment is the single graph's decode "
        "([operations.md](operations.md#memory))",
    )
    float_vocoder: bool = Field(
        True,
        description="the ONNX engine on the CPU runs the vocoder's convolutions in float on weights "
        "dequantized at load (kept in the cache): ~11% less CPU per audio second, ~120 MB more memory at "
        "ready; false: the int8 graph as exported ([engine.md](engine.md#float-convolutions))",
    )
    windowed_first: bool = Field(
        True,
        description="a streamed turn's first segment decoded in windows even so: its first audio comes "
        "after one window instead of the whole segment "
        "([engine.md](engine.md#the-first-segment-windowed-by-default))",
    )
    # WebSocket sessions
    max_sessions: Count = Field(
        32,
        description="WebSocket and Wyoming sessions at once: past it WS `error` `too_many_sessions` with "
        "`retry_after_s`, close **1013** on connect",
    )
    max_message_bytes: Count = Field(
        64 * 1024,
        description="a WebSocket message larger than this: WS `error` `message_too_large`, close **1009**; a "
        "frame over twice this is closed 1009 by the WebSocket layer itself, without a message",
    )
    max_message_chars: Count = Field(
        16_000,
        description="a WebSocket message's text longer than this: WS `error` `text_too_long`, close **1009**",
    )
    max_turn_chars: Count = Field(
        100_000, description="a turn's text longer than this: WS `error` `turn_too_long`, close **1008**"
    )
    max_session_chars: Count = Field(
        1_000_000,
        description="a session's text longer than this: WS `error` `session_too_long`, close **1008**",
    )
    max_pending_turns: Count = Field(
        16,
        description="a new turn (an `append`, `Speak`, `flush`, AWS request) while this many of the "
        "session's turns are still to be spoken: WS `error` `too_many_turns`, the session **stays open**, "
        "the refused turn gets no number",
    )
    idle_timeout_s: Seconds = Field(
        300.0,
        description="WS `error` `idle_timeout`, close **1008**: nothing received and nothing sent for this "
        "long, and no turn's audio on its way to a client that takes it",
    )
    max_session_s: Seconds = Field(
        3600.0, description="a session open longer than this: WS `error` `session_expired`, close **1008**"
    )
    frame_s: Seconds = Field(MAX_FRAME_S, le=MAX_FRAME_S, description="audio per binary frame")
    audio_high_water_s: Seconds = Field(
        10.0,
        description="a session whose unsent audio reaches this pauses its own synthesis until it drains "
        "below the low mark",
    )
    audio_low_water_s: Seconds = Field(
        4.0, description="where a paused session's synthesis resumes; below the high mark"
    )
    # HTTP
    max_body_bytes: Count = Field(
        256 * 1024,
        description="an HTTP body larger than this: **413** `body_too_large` (read no further than the "
        "limit; the connection closes)",
    )
    max_request_chars: Count = Field(
        20_000, description="an HTTP request's text longer than this: **413** `text_too_long`"
    )
    request_max_age_s: Seconds = Field(
        60.0, description="a `request_timestamp` older than this: HTTP **408** `request_stale`"
    )
    max_http_requests: Count = Field(
        32, description="HTTP requests at once: past it **503** `too_many_sessions` with `Retry-After`"
    )
    # slow clients: a request's head, its body, and any send that cannot progress
    header_timeout_s: Seconds = Field(
        10.0,
        description="a request line and headers not complete this long after the connection opened or the "
        "previous response ended: the socket is closed without an answer",
    )
    body_timeout_s: Seconds = Field(
        30.0,
        description="a body not complete this long after the route asked for it: HTTP **408** "
        "`body_timeout`, `Connection: close` (the agent's routes: 30 s, fixed)",
    )
    send_timeout_s: Seconds = Field(
        30.0,
        description="a send that could not progress this long because the client reads nothing: the "
        "connection is aborted and its synthesis stops",
    )
    # scheduler
    max_queued_jobs: Count = Field(
        64,
        description="a new turn or request past it: HTTP **503** / WS `error` `queue_saturated` + close "
        "**1013**, with the queue's estimated drain time; continuations of admitted turns are never refused",
    )
    capacity_share: float = Field(
        DEFAULT_CAPACITY_SHARE,
        ge=0,
        le=1,
        description="a new session's first turn or a request that would make the listeners being spoken to "
        "need more than this share of the audio-seconds per second the machine makes (its cores × the audio "
        "made per CPU-second): HTTP **503** / WS `error` `over_capacity` + close **1013**, with a retry "
        "hint; 0 turns it off ([Admission](#admission))",
    )
    segments_ahead: Count = Field(1, description="segments of one turn queued or running at once")
    segment_cache_mb: float = Field(
        64.0,
        ge=0,
        le=MAX_SEGMENT_CACHE_MB,
        description="segments said before are replayed from memory, the least recently used evicted past "
        "this many MB; 0 turns the cache off ([Segment cache](#segment-cache))",
    )
    precache: str | None = Field(
        None,
        description="`builtin` or a JSON file of voice → openers, synthesized into the cache once `/ping` "
        "is 200; a file that cannot be used stops the server at start",
    )
    # lifecycle
    shutdown_grace_s: Seconds = Field(
        20.0,
        description="after SIGTERM: sessions closed **1012**, HTTP responses cancelled after this "
        "(SageMaker kills the container 30 s after SIGTERM)",
    )
    # access: no key means no auth, as on loopback and behind SageMaker's own auth
    api_key: str | None = Field(
        None,
        repr=False,
        description=f"at least {MIN_API_KEY_CHARS} printable ASCII characters: HTTP **401** `unauthorized`; "
        "WS `error` `unauthorized`, close **1008** ([Access](#access)); `koe agent` and the clients send it "
        "to their TTS server",
    )
    allow_unauthenticated: bool = Field(
        False, description="silences the warning for a non-loopback host without a key"
    )
    cors_origins: tuple[str, ...] = Field(
        (),
        description="origins (or `*`) whose pages may use the server besides its own and this machine's; a "
        "preflight from another: **400**; a WebSocket or POST from another: **403** `forbidden_origin` "
        "([Origin and Host](#origin-and-host))",
    )
    allowed_hosts: tuple[str, ...] = Field(
        (),
        description="`Host` names (or `*`) served besides loopback ones: **403** `forbidden_host` for any "
        "other while listening on loopback, or on any address once set",
    )
    openai_voices: tuple[str, ...] = Field(
        (),
        description="OpenAI's voice names → Kokoro voices over koe's defaults: `alloy=af_bella,nova=bf_emma` "
        "([api.md](api.md))",
    )
    # Wyoming (Home Assistant)
    wyoming_port: Port | None = Field(
        None,
        description="`koe serve` also runs the [Wyoming](wyoming.md) server on this port of the host "
        "(`koe wyoming` runs it alone, on 10200 by default); its connections hold `max_sessions` slots, "
        "and it has no authentication ([wyoming.md](wyoming.md#access-wyoming-has-no-authentication))",
    )
    wyoming_socket: Path | None = Field(
        None,
        description=f"the Wyoming server on this Unix socket instead of a TCP port: an absolute path of at "
        f"most {MAX_SOCKET_PATH_BYTES} bytes, the file made with mode `0660` and removed on exit; not with "
        "a Wyoming port or zeroconf name ([wyoming.md](wyoming.md#running-it))",
    )
    wyoming_zeroconf: str | None = Field(
        None,
        description="announce the Wyoming server over zeroconf under this name (the `zeroconf` extra; TCP "
        "only)",
    )

    @functools.cached_property
    def layout(self) -> Layout:
        """The workers and threads the server runs: ``workers`` and ``threads_per_worker`` where set, the
        rest sized from the cores this process may use, read on first use (the server's start). What reads
        the two reads them here, never from the fields."""
        return layout_of(self.workers, self.threads_per_worker, usable_cores())

    def __post_init__(self) -> None:
        """The checks that span fields or read a value's content (pydantic checked each field's range)."""
        require(
            "audio_low_water_s",
            self.audio_low_water_s < self.audio_high_water_s,
            f"below audio_high_water_s ({self.audio_high_water_s})",
        )
        if self.api_key is not None:
            key = self.api_key
            require(
                "api_key",
                len(key) >= MIN_API_KEY_CHARS and key.isascii() and key.isprintable() and " " not in key,
                f"at least {MIN_API_KEY_CHARS} printable ASCII characters without spaces",
            )
        require(
            "openai_voices",
            all(
                name.strip() and voice.strip()
                for name, _, voice in (p.partition("=") for p in self.openai_voices)
            ),
            "NAME=VOICE pairs such as alloy=af_bella",
        )
        require(
            "cors_origins",
            all(o == "*" or o.startswith(("http://", "https://")) for o in self.cors_origins),
            "'*' or origins such as https://app.example.com",
        )
        if self.wyoming_socket is not None:
            socket_path = self.wyoming_socket
            require(
                "wyoming_socket",
                socket_path.is_absolute() and len(os.fsencode(socket_path)) <= MAX_SOCKET_PATH_BYTES,
                f"an absolute path of at most {MAX_SOCKET_PATH_BYTES} bytes",
            )
            require(
                "wyoming_socket",
                self.wyoming_port is None,
                "unset while wyoming_port is set: Wyoming listens on one or the other",
            )
            require(
                "wyoming_socket",
                self.wyoming_zeroconf is None,
                "unset while wyoming_zeroconf is set: zeroconf announces a TCP port",
            )


@dataclass(frozen=True, config=CONFIG)
class AgentSettings(Group):
    """The voice agent (``koe serve``'s page, ``koe agent``): its LLM (docs/agent.md) and, for ``koe
    agent``, its TTS server."""

    llm: Literal["auto", "openai", "bedrock", "local", "none"] = Field(
        "auto",
        description="the LLM (`--llm`); `auto`: OpenAI-compatible when a base URL or an API key is set, else "
        "the local model when the `local-llm` extra is installed, else none (the page's read-aloud mode)",
    )
    llm_model: str | None = Field(
        None, description="the model name, or the Bedrock model id, which `bedrock` needs (`--model`)"
    )
    llm_base_url: str | None = Field(None, description="an OpenAI-compatible API's root (`--base-url`)")
    llm_api_key: str | None = Field(None, repr=False, description="the OpenAI-compatible API's key")
    llm_region: str | None = Field(
        None, description="Bedrock's region (`--region`); empty: boto3's own configuration"
    )
    llm_max_tokens: Count | None = Field(None, description="an answer's length limit (`--max-tokens`)")
    tts: str | None = Field(
        None,
        description="`koe agent`'s TTS (`--tts`): `ws://host:8080` (a koe server) or "
        "`sagemaker://ENDPOINT?region=…`",
    )


@dataclass(frozen=True, config=CONFIG)
class ProcessSettings(Group):
    """Every command: its logs and koe's cache."""

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = Field(
        "WARNING", description="the log level (`--log-level`)"
    )
    log_format: Literal["text", "json"] = Field(
        "text", description="text lines, or one JSON object per line (`--log-format`, `--log-json`)"
    )
    cache_dir: Path | None = Field(
        None,
        description="koe's cache (verdicts, optimized graphs, calibrations, measured costs); empty: the "
        "platform's user cache directory",
    )


#: Every group with its title in the reference, in the reference's order.
GROUPS: tuple[tuple[str, type[Group]], ...] = (
    ("The server and the engine (`koe.settings.Settings`)", Settings),
    ("The voice agent (`koe.settings.AgentSettings`)", AgentSettings),
    ("Every command (`koe.settings.ProcessSettings`)", ProcessSettings),
)


def reference_markdown() -> str:
    """The reference of every ``KOE_*`` variable: one Markdown table a group, one row a field."""
    lines: list[str] = []
    for title, group in GROUPS:
        lines += [
            "",
            f"**{title}**",
            "",
            "| Variable | Accepts | Default | What it sets |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| `{variable(name)}` | {accepted(info)} | {_default(info.default)} | {info.description} |"
            for name, info in fields_of(group).items()
        ]
    return "\n".join(lines[1:]) + "\n"


def with_reference(doc: str) -> str:
    """``doc`` with :func:`reference_markdown` between its :data:`REFERENCE_START` and :data:`REFERENCE_END`
    lines.

    Raises:
        ConfigError: ``doc`` lacks either line, or has them out of order.
    """
    start, end = doc.find(REFERENCE_START + "\n"), doc.find(REFERENCE_END)
    if start < 0 or end < start:
        raise ConfigError(f"expected the lines {REFERENCE_START!r} and then {REFERENCE_END!r}")
    before = doc[: start + len(REFERENCE_START) + 1]
    return f"{before}\n{reference_markdown()}\n{doc[end:]}"


def _default(value: Any) -> str:
    if value is None or value == ():
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    return f"`{value}`" if isinstance(value, str) else str(value)
