"""The one frozen settings object: every limit of the server, finite and named, built once.

Values come from the defaults below, then ``KOE_<FIELD>`` environment variables, then explicit overrides
(the CLI's flags), and are validated together, so a bad value fails at start-up with the field's name.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, get_type_hints

from koe.errors import ConfigError

#: The protocol caps one audio frame at 100 ms so that a cancel never waits behind more than that.
MAX_FRAME_S = 0.1
_ENV_PREFIX = "KOE_"
#: The segment cache's ceiling: 16 GiB of float32 audio is ~2 days of speech, far past any useful working set.
MAX_SEGMENT_CACHE_MB = 16_384
#: A batch window is a few milliseconds; past this it would cost first audio more than batching saves.
MAX_BATCH_WINDOW_S = 0.1
#: A shorter API key could be guessed; 16 characters is what ``secrets.token_urlsafe(12)`` gives.
MIN_API_KEY_CHARS = 16


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the server can be told. Sizes in bytes or characters, durations in seconds."""

    # loopback unless told otherwise; container images set KOE_HOST=0.0.0.0 so SageMaker reaches port 8080
    host: str = "127.0.0.1"
    port: int = 8080
    # engine
    engine: str = "onnx"  # "onnx" or "torch" (the GPU image; docs/deploy.md)
    model_dir: Path | None = None
    download: bool = False  # fetch the fp32 model and voices from Hugging Face (needs internet)
    workers: int = 2  # concurrent synthesis calls; 2 x 2 threads measured best here (docs/api.md)
    threads_per_worker: int = 2  # ONNX Runtime intra-op threads of the engine
    warmup: bool = True
    # a start with nothing measured kept (a container's) measures this machine's costs after /ping is 200,
    # while idle, giving way to any request; false: before the 200 (docs/operations.md, "Cold start")
    measure_after_ready: bool = True
    default_voice: str = "af_heart"
    device: str | None = None  # torch engine: "cpu", "cuda", "cuda:N"; None picks CUDA when there is one
    # an engine that shares passes (torch): whole segments of all sessions share engine calls, up to this
    # many per call (1: every segment alone), a call waiting at most batch_window_s for more (docs/api.md)
    batch_max_segments: int = 16
    batch_window_s: float = 0.005
    # streamed segments decode window by window, their audio sent in parts (docs/engine.md, "Streaming
    # decoder"); off by default: windowed audio fails the spectral-balance quality gate
    windowed: bool = False
    # a streamed turn's first segment decodes in windows even so: its first audio comes after stage A and
    # one window (~0.3 s) instead of the whole segment (docs/engine.md, "The first segment")
    windowed_first: bool = True
    # WebSocket sessions
    max_sessions: int = 32
    max_message_bytes: int = 64 * 1024
    max_message_chars: int = 16_000
    max_turn_chars: int = 100_000
    max_session_chars: int = 1_000_000
    max_pending_turns: int = 16  # turns of one session opened and not yet spoken to their end
    idle_timeout_s: float = 300.0
    max_session_s: float = 3600.0
    frame_s: float = MAX_FRAME_S
    audio_high_water_s: float = 10.0
    audio_low_water_s: float = 4.0
    # HTTP
    max_body_bytes: int = 256 * 1024
    max_request_chars: int = 20_000
    request_max_age_s: float = 60.0
    max_http_requests: int = 32
    # slow clients (docs/operations.md): a request's head, its body, and any send that cannot progress
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    send_timeout_s: float = 30.0
    # scheduler
    max_queued_jobs: int = 64
    segments_ahead: int = 1  # segments of one turn queued or running at once
    # segment cache (docs/operations.md): audio of segments said before, replayed bit for bit; 0 disables it
    segment_cache_mb: float = 64.0
    precache: str | None = None  # "builtin" or a JSON file of voice → openers, synthesized once ready
    # lifecycle
    shutdown_grace_s: float = 20.0  # SageMaker kills the container 30 s after SIGTERM
    # access (docs/operations.md): no key means no auth, as on loopback and behind SageMaker's own auth
    api_key: str | None = dataclasses.field(default=None, repr=False)
    allow_unauthenticated: bool = False  # silences the warning for a non-loopback host without a key
    cors_origins: tuple[str, ...] = ()  # origins whose pages may call the routes and open WebSockets; "*" any
    allowed_hosts: tuple[str, ...] = ()  # Host names besides loopback (DNS rebinding check); "*" for any
    # OpenAI's voice names → Kokoro voices, over koe's defaults: "alloy=af_bella,nova=bf_emma" (docs/api.md)
    openai_voices: tuple[str, ...] = ()
    # Wyoming (Home Assistant, docs/wyoming.md): its TCP port beside the HTTP server's, off unless set; and
    # the name it is announced by over zeroconf (the zeroconf extra), not announced unless set
    wyoming_port: int | None = None
    wyoming_zeroconf: str | None = None

    def __post_init__(self) -> None:
        for name in (
            "workers",
            "threads_per_worker",
            "max_sessions",
            "max_message_bytes",
            "max_message_chars",
            "max_turn_chars",
            "max_session_chars",
            "max_pending_turns",
            "max_body_bytes",
            "max_request_chars",
            "max_http_requests",
            "max_queued_jobs",
            "segments_ahead",
            "batch_max_segments",
        ):
            _require(name, getattr(self, name) >= 1, "an integer >= 1")
        for name in (
            "idle_timeout_s",
            "max_session_s",
            "frame_s",
            "audio_high_water_s",
            "audio_low_water_s",
            "request_max_age_s",
            "shutdown_grace_s",
            "header_timeout_s",
            "body_timeout_s",
            "send_timeout_s",
        ):
            value = getattr(self, name)
            _require(name, math.isfinite(value) and value > 0, "a finite number > 0")
        _require(
            "segment_cache_mb",
            math.isfinite(self.segment_cache_mb) and 0 <= self.segment_cache_mb <= MAX_SEGMENT_CACHE_MB,
            f"a number of megabytes from 0 to {MAX_SEGMENT_CACHE_MB}",
        )
        _require(
            "batch_window_s",
            math.isfinite(self.batch_window_s) and 0 <= self.batch_window_s <= MAX_BATCH_WINDOW_S,
            f"seconds in [0, {MAX_BATCH_WINDOW_S}]",
        )
        _require("port", 0 <= self.port <= 65535, "a port number in [0, 65535]")
        _require(
            "wyoming_port",
            self.wyoming_port is None or 0 <= self.wyoming_port <= 65535,
            "a port number in [0, 65535]",
        )
        _require("engine", self.engine in ("onnx", "torch"), "'onnx' or 'torch'")
        _require("frame_s", self.frame_s <= MAX_FRAME_S, f"at most {MAX_FRAME_S} s")
        _require(
            "audio_low_water_s",
            self.audio_low_water_s < self.audio_high_water_s,
            f"below audio_high_water_s ({self.audio_high_water_s})",
        )
        if self.api_key is not None:
            key = self.api_key
            _require(
                "api_key",
                len(key) >= MIN_API_KEY_CHARS and key.isascii() and key.isprintable() and " " not in key,
                f"at least {MIN_API_KEY_CHARS} printable ASCII characters without spaces",
            )
        _require(
            "openai_voices",
            all(
                name.strip() and voice.strip()
                for name, _, voice in (p.partition("=") for p in self.openai_voices)
            ),
            "NAME=VOICE pairs such as alloy=af_bella",
        )
        _require(
            "cors_origins",
            all(o == "*" or o.startswith(("http://", "https://")) for o in self.cors_origins),
            "'*' or origins such as https://app.example.com",
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Build settings from ``KOE_*`` variables, then ``overrides`` (``None`` values are ignored).

        Raises:
            ConfigError: a variable or override has the wrong type or is out of range; names the field.
        """
        environ = os.environ if environ is None else environ
        hints = get_type_hints(cls)
        values: dict[str, Any] = {}
        for field in fields(cls):
            raw = environ.get(_ENV_PREFIX + field.name.upper())
            if raw is not None:
                values[field.name] = _convert(field.name, raw, hints[field.name])
        unknown = set(overrides) - {field.name for field in fields(cls)}
        if unknown:
            raise ConfigError(f"unknown settings: {sorted(unknown)}", code="invalid_field")
        values.update({name: value for name, value in overrides.items() if value is not None})
        return cls(**values)


def _require(name: str, ok: bool, expected: str) -> None:
    if not ok:
        raise ConfigError(f"setting {name}: expected {expected}", code="invalid_field")


def _convert(name: str, raw: str, hint: Any) -> Any:
    """Turn one environment string into the field's type; ``hint`` is the resolved annotation."""
    try:
        if hint is bool:
            lowered = raw.strip().lower()
            if lowered not in {"1", "0", "true", "false", "yes", "no"}:
                raise ValueError(raw)
            return lowered in {"1", "true", "yes"}
        if hint is int:
            return int(raw)
        if hint == int | None:
            return int(raw) if raw else None
        if hint is float:
            value = float(raw)
            if not math.isfinite(value):
                raise ValueError(raw)
            return value
        if hint == Path | None:
            return Path(raw) if raw else None
        if hint == str | None:
            return raw or None
        if hint == tuple[str, ...]:
            return tuple(item.strip() for item in raw.split(",") if item.strip())
        return raw
    except ValueError as exc:
        raise ConfigError(
            f"{_ENV_PREFIX}{name.upper()}: expected {getattr(hint, '__name__', hint)}, got {raw!r}",
            code="invalid_field",
        ) from exc
