"""The ``koe`` command: the only place that configures logging or exits.

Each subcommand has a ``_register_<name>`` function that adds its parser and sets its handler; other
distributions add subcommands through the :data:`COMMANDS_GROUP` entry points (the benchmark package in
``bench/`` adds ``bench`` and ``soak``), so koe never imports them. Heavy imports (ONNX Runtime, spaCy)
happen inside handlers so that ``koe --help`` stays instant.
"""

from __future__ import annotations

import argparse
import gc
import logging
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from koe.errors import ConfigError, KoeError
from koe.extras import BENCH_INSTALL_HINT
from koe.logs import JsonFormatter, RedactSecrets, TextFormatter

if TYPE_CHECKING:
    from concurrent.futures import Future

    from koe.pipeline.speech import Speech
    from koe.settings import Settings

#: The CLI's own records: start-up banners and errors when logs are JSON (:func:`_announce`); named, not
#: ``__name__``, which is ``__main__`` under ``python -m koe.cli``.
logger = logging.getLogger("koe.cli")
_stderr = Console(stderr=True)

Handler = Callable[[argparse.Namespace], int]
_LOG_FORMATS = ("text", "json")

_EXTENSION_FORMATS = {
    ".wav": "wav", ".mp3": "mp3", ".ogg": "opus", ".opus": "opus", ".flac": "flac", ".aac": "aac",
    ".pcm": "pcm", ".raw": "pcm", ".ulaw": "mulaw", ".alaw": "alaw",
}  # fmt: skip


def _announce(args: argparse.Namespace, message: str, *, level: int = logging.INFO, **fields: object) -> None:
    """Tell the operator ``message`` (a banner, an error) at any log level: as text for a person, or with
    ``--log-format json`` as one record in the logs' own shape with ``fields``, so that every line a
    collector reads from stderr parses as JSON."""
    if args.log_format == "json":
        logger.log(level, message, extra=fields)
    else:
        style = "red" if level >= logging.ERROR else None
        _stderr.print(message, style=style, markup=False, soft_wrap=True)  # one line, however long


def _http_url(settings: Settings) -> str:
    """Where the server listens, as a browser or client would write it (an IPv6 address in brackets)."""
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    return f"http://{host}:{settings.port}"


@contextmanager
def _status(message: str) -> Iterator[None]:
    """A spinner on stderr for anything slower than a second (never stdout, which may carry audio)."""
    with _stderr.status(message):
        yield


def settings_of(args: argparse.Namespace, **flags: Any) -> Settings:
    """Settings from ``KOE_*`` variables and the shared engine flags (and ``flags``, where given)."""
    from koe.settings import Settings

    return Settings.from_env(
        engine=args.engine,
        model_dir=Path(args.model_dir) if args.model_dir else None,
        download=args.download or None,
        threads_per_worker=args.threads,
        **flags,
    )


def load_speech(args: argparse.Namespace, *, warmup: bool = True, **needs: Any) -> Speech:
    """``needs``: :class:`~koe.pipeline.speech.SpeechOptions` fields to override (what to load)."""
    from koe.pipeline.speech import Speech, SpeechOptions

    with _status("loading Kokoro-82M, voices and G2P…"):
        return Speech.load(SpeechOptions.from_settings(settings_of(args), warmup=warmup, **needs))


def _add_engine_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model-dir", help="directory with one .onnx and voices (default: KOE_MODEL_DIR)")
    parser.add_argument(
        "--download",
        action="store_true",
        help="use the fp32 model and voices from Hugging Face (`koe install --download` fetches them)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        help="engine threads per worker (default: KOE_THREADS_PER_WORKER, else 2, fewer on fewer cores)",
    )
    parser.add_argument("--engine", choices=["onnx", "torch"], help="backend (default: KOE_ENGINE or onnx)")


# --- koe say -----------------------------------------------------------------------------------------


def _register_say(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("say", help="speak text to a file or to stdout")
    parser.add_argument("text", nargs="?", help="text to speak (default: read stdin)")
    parser.add_argument("-v", "--voice", default="af_heart", help="voice or blend, e.g. 'af_bella(2)+af_sky'")
    parser.add_argument("-s", "--speed", type=float, default=1.0)
    parser.add_argument(
        "-l", "--lang", help="language: en-us, en-gb, es, fr, hi, it, ja, pt-br, zh (default: the voice's)"
    )
    parser.add_argument("-o", "--output", type=Path, help="output file; its extension sets the format")
    parser.add_argument("-f", "--format", help="wav, mp3, opus, flac, aac, pcm, mulaw, alaw")
    parser.add_argument("-r", "--rate", type=int, default=24_000, help="sample rate in Hz")
    _add_engine_flags(parser)
    parser.set_defaults(handler=_run_say)


def _output_format(args: argparse.Namespace) -> str:
    if args.format:
        return str(args.format)
    if args.output is not None:
        suffix = args.output.suffix.lower()
        if suffix not in _EXTENSION_FORMATS:
            known = ", ".join(sorted(_EXTENSION_FORMATS))
            raise KoeError(f"cannot tell the format of {args.output}: use --format or one of {known}")
        return _EXTENSION_FORMATS[suffix]
    return "wav" if not sys.stdout.isatty() else "pcm"


def _needs_of(spec: str, lang: str | None) -> dict[str, Any]:
    """What one utterance in voice ``spec`` needs loaded: its voices and the language it is read in (the
    voice's, unless ``lang`` says), not the other voices' files nor American English's G2P for a Japanese
    voice. Nothing is narrowed for a spec koe cannot tell (a malformed blend, a voice of a local model
    directory): the synthesis then says what is wrong, as it would have."""
    from koe.engine.voices import VOICES, language_of, parse_blend

    try:
        names = tuple(dict.fromkeys(name for name, _weight in parse_blend(spec)))
    except KoeError:
        return {}
    if not set(names) <= set(VOICES):
        return {}
    return {"voices": names, "required_voices": names, "langs": (lang or language_of(names[0]).code,)}


def _run_say(args: argparse.Namespace) -> int:
    from koe.audio.encoder import encode_whole
    from koe.audio.formats import check_sample_rate, parse_format

    text = args.text if args.text is not None else sys.stdin.read()
    fmt = parse_format(_output_format(args))
    rate = check_sample_rate(fmt, args.rate)
    speech = load_speech(args, warmup=False, **_needs_of(args.voice, args.lang))
    started = time.perf_counter()
    with _status("synthesizing…"):
        audio = speech.synthesize(text, voice=args.voice, speed=args.speed, lang=args.lang)
    elapsed = time.perf_counter() - started
    data = encode_whole(audio, fmt, rate)
    if args.output is None:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        args.output.write_bytes(data)
    seconds = len(audio) / speech.sample_rate
    _stderr.print(
        f"{seconds:.2f} s of audio in {elapsed:.2f} s (RTF {elapsed / max(seconds, 1e-9):.2f}), "
        f"{speech.engine.description}"
    )
    return 0


# --- koe voices --------------------------------------------------------------------------------------


def _register_voices(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("voices", help="list the voices with their language and gender")
    parser.add_argument("-l", "--lang", help="only this language's voices (e.g. ja, es, en-gb)")
    parser.set_defaults(handler=_run_voices)


def _run_voices(args: argparse.Namespace) -> int:
    from koe.engine.voices import VOICES, describe
    from koe.wire.params import validate_lang

    lang = None if args.lang is None else validate_lang(args.lang)
    table = Table("voice", "lang", "language", "gender")
    for info in (describe(name) for name in VOICES):
        if lang is None or info.lang == lang:
            table.add_row(info.name, info.lang, info.language, info.gender)
    Console().print(table)
    return 0


# --- koe install ---------------------------------------------------------------------------------------


def _register_install(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("install", help="fetch and verify the model's voices into koe's cache")
    parser.add_argument("--force", action="store_true", help="fetch again even if present")
    parser.add_argument(
        "--engine",
        choices=["onnx", "torch"],
        default="onnx",
        help="torch also installs its weights (see --weights)",
    )
    parser.add_argument(
        "--weights",
        choices=["auto", "official", "derived"],
        default="auto",
        help="torch weights: official (download), derived (offline, from the int8 model), auto (official, "
        "else derived)",
    )
    parser.add_argument(
        "--download", action="store_true", help="also fetch the fp32 model and voices from Hugging Face"
    )
    parser.set_defaults(handler=_run_install)


def _run_install(args: argparse.Namespace) -> int:
    from koe.engine.assets import install_voices, packaged_model_bytes
    from koe.engine.voices import VOICES
    from koe.prepared import prepare_g2p, prepare_onnx
    from koe.settings import Settings

    with _status("verifying the int8 model…"):
        packaged_model_bytes()
    with _status("fetching voices…"):
        target = install_voices(list(VOICES), force=args.force)
    settings = Settings.from_env()
    if args.engine == "onnx":
        with _status("proving the stage cut and calibrating the default voice on this machine…"):
            prepare_onnx(settings, target)
    with _status("building the default voice's G2P once…"):
        prepare_g2p(settings)
    _fetch_remote(args.engine, download=args.download, weights=args.weights)
    _stderr.print(f"model verified; {len(VOICES)} voices verified in {target}")
    _report_languages()
    return 0


def _report_languages() -> None:
    """Say which languages' G2P is installed, and the command for each that is not (nothing is built)."""
    from koe.g2p.registry import G2PRegistry

    registry = G2PRegistry()
    missing: list[str] = []
    for lang in registry.langs:
        try:
            registry.check(lang)
        except KoeError as exc:
            missing.append(exc.message)
    if missing:
        for message in missing:
            _stderr.print(f"[yellow]warning:[/] {message}")
    else:
        _stderr.print(f"G2P installed for every language: {', '.join(registry.langs)}")


def _fetch_remote(engine: str, *, download: bool, weights: str = "auto") -> None:
    """What comes from Hugging Face (needs internet): the fp32 files with ``download``; and torch's weights
    (official from Hugging Face, or derived offline from the int8 model: ``weights``)."""
    from koe.engine.assets import download_from_hugging_face, hugging_face_dir
    from koe.engine.voices import VOICES

    if download:
        with _status("fetching the fp32 model and voices from Hugging Face…"):
            download_from_hugging_face(hugging_face_dir(), list(VOICES), model=engine == "onnx")
    if engine == "torch":
        from koe.conversion.install import install

        with _status("installing the PyTorch weights (official if reachable, else derived from int8)…"):
            installed = install(weights)
        _stderr.print(f"PyTorch weights verified: {installed.kind} ({installed.path})")


# --- koe doctor ----------------------------------------------------------------------------------------


def _register_doctor(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("doctor", help="check assets, hashes and G2P; time one sentence")
    _add_engine_flags(parser)
    parser.set_defaults(handler=_run_doctor)


def _run_doctor(args: argparse.Namespace) -> int:
    from importlib.metadata import version

    import onnxruntime

    from koe import __version__

    table = Table("check", "result")
    table.add_row("koe", __version__)
    table.add_row("python", sys.version.split()[0])
    for package in ("onnxruntime", "misaki", "spacy", "numpy", "soxr", "av"):
        table.add_row(package, version(package))
    table.add_row("providers", ", ".join(onnxruntime.get_available_providers()))
    started = time.perf_counter()
    speech = load_speech(args, warmup=False)
    table.add_row("load (model, voices, G2P; hashes verified)", f"{time.perf_counter() - started:.2f} s")
    table.add_row("engine", speech.engine.description)
    table.add_row("voices", str(len(speech.voices.names())))
    sentence = "The quick brown fox jumps over the lazy dog."
    table.add_row("G2P", " ".join(speech.phonemize(sentence)))
    speech.synthesize(sentence)  # the first run pays one-off allocation costs
    started = time.perf_counter()
    audio = speech.synthesize(sentence)
    elapsed = time.perf_counter() - started
    seconds = len(audio) / speech.sample_rate
    table.add_row("synthesis", f"{seconds:.2f} s of audio in {elapsed:.2f} s (RTF {elapsed / seconds:.2f})")
    Console().print(table)
    return 0


# --- koe serve ----------------------------------------------------------------------------------------


def _register_serve(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "serve", help="serve the SageMaker contract, the streaming protocol and the OpenAI speech API"
    )
    _add_listen_flags(parser, port_default="KOE_PORT or 8080")
    parser.add_argument("--windowed", action="store_true", help="decode streamed segments in windows")
    _add_engine_flags(parser)
    parser.set_defaults(handler=_run_serve)


def _add_listen_flags(parser: argparse.ArgumentParser, *, port_default: str) -> None:
    """The flags every serving command shares: where it listens, and how many synthesis calls at once."""
    parser.add_argument("--host", help="address to listen on (default: KOE_HOST or 127.0.0.1)")
    parser.add_argument("--port", type=int, help=f"port (default: {port_default})")
    parser.add_argument(
        "--workers",
        type=int,
        help="concurrent synthesis calls (default: KOE_WORKERS, else one per usable core, at least 2)",
    )


def _announce_layout(args: argparse.Namespace, settings: Settings) -> None:
    """The synthesis layout a serving command runs and why (sized from the cores, or as set)."""
    layout = settings.layout
    _announce(
        args,
        f"synthesis: {layout}",
        workers=layout.workers,
        threads_per_worker=layout.threads,
        usable_cores=layout.cores,
    )


def _load_for_serving(settings: Settings) -> Future[Speech]:
    """Start loading the engine in the background, after fetching it first when asked to download."""
    from koe.server.runtime import load_in_background

    if settings.download:  # loading only verifies: fetch first, as `koe install --download` does
        _fetch_remote(settings.engine, download=True)
    return load_in_background(settings)


def _run_serve(args: argparse.Namespace) -> int:
    from koe.agent.config import LLMConfig

    settings = settings_of(
        args, host=args.host, port=args.port, workers=args.workers, windowed=args.windowed or None
    )
    llm = LLMConfig.from_env()  # a bad KOE_LLM* fails here, before the model loads
    loading = _load_for_serving(settings)  # while the web stack is imported
    from koe.app import serve

    url = _http_url(settings)
    _announce(args, f"koe on {url} — /ping answers 200 once the model is warm", url=url)
    _announce_layout(args, settings)
    brain = llm.describe()
    _announce(args, f"the page: {url}/ — the agent's LLM: {brain}", page=f"{url}/", llm=brain)
    required = settings.api_key is not None
    _announce(
        args,
        "API key required (KOE_API_KEY): Authorization: Bearer <key>; the page: #api_key=<key>"
        if required
        else "no API key required (KOE_API_KEY is not set)",
        api_key_required=required,
    )
    from koe.server.wyoming import listen_uri

    wyoming = listen_uri(settings)
    if wyoming is not None:
        _announce(args, f"Wyoming beside it on {wyoming} (docs/wyoming.md)", wyoming=wyoming)
    serve(settings, loading, llm)
    return 0


# --- koe wyoming --------------------------------------------------------------------------------------


def _register_wyoming(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "wyoming", help="serve Wyoming alone (Home Assistant's local TTS protocol, streamed), docs/wyoming.md"
    )
    _add_listen_flags(parser, port_default="KOE_WYOMING_PORT or 10200")
    parser.add_argument(
        "--uri",
        help="where to listen, as Wyoming's own servers take it: tcp://HOST:PORT, unix:///PATH (a Unix "
        "socket its owner and group may connect to) or stdio:// (one connection on stdin and stdout, logs on "
        "stderr, until stdin ends); default: KOE_WYOMING_SOCKET, else --host and --port",
    )
    parser.add_argument(
        "--zeroconf",
        nargs="?",
        const="koe",
        metavar="NAME",
        help="announce the server for Home Assistant's discovery as NAME (default name: koe; needs the "
        "zeroconf extra; default: KOE_WYOMING_ZEROCONF)",
    )
    _add_engine_flags(parser)
    parser.set_defaults(handler=_run_wyoming)


def _run_wyoming(args: argparse.Namespace) -> int:
    import asyncio
    import dataclasses

    from koe.server.stdio import STDIO_URI

    settings = settings_of(
        args, workers=args.workers, wyoming_zeroconf=args.zeroconf, **_wyoming_address(args)
    )
    if args.uri == STDIO_URI:
        return _run_wyoming_stdio(args, settings)
    from koe.server.wyoming import DEFAULT_PORT, listen_uri, serve

    if settings.wyoming_port is None and settings.wyoming_socket is None:
        settings = dataclasses.replace(settings, wyoming_port=DEFAULT_PORT)
    loading = _load_for_serving(settings)
    wyoming = listen_uri(settings)
    _announce(args, f"koe's Wyoming server on {wyoming}", wyoming=wyoming)
    _announce_layout(args, settings)
    asyncio.run(serve(settings, loading))
    return 0


def _run_wyoming_stdio(args: argparse.Namespace, settings: Settings) -> int:
    """``--uri stdio://``: stdout carries Wyoming's events and nothing else, so it is taken from the process
    before the model loads; the banner, logs and any library's output go to stderr."""
    import asyncio

    from koe.server import stdio

    if settings.wyoming_zeroconf is not None:
        raise ConfigError(
            f"--zeroconf announces a TCP port: expected no zeroconf name with --uri {stdio.STDIO_URI}"
        )
    taken = stdio.claim()
    loading = _load_for_serving(settings)
    from koe.server.wyoming import serve_stdio

    _announce(args, f"koe's Wyoming server on {stdio.STDIO_URI} (stdin and stdout)", wyoming=stdio.STDIO_URI)
    _announce_layout(args, settings)
    asyncio.run(serve_stdio(settings, taken, loading))
    return 0


def _wyoming_address(args: argparse.Namespace) -> dict[str, Any]:
    """The settings ``--uri`` names (``tcp://HOST:PORT``, ``unix:///PATH``; none for ``stdio://``), else
    ``--host`` and ``--port``.

    Raises:
        ConfigError: ``--uri`` is given with ``--host`` or ``--port``, or is none of these forms.
    """
    from urllib.parse import urlsplit

    from koe.errors import ConfigError
    from koe.server.stdio import STDIO_URI

    if args.uri is None:
        return {"host": args.host, "wyoming_port": args.port}
    if args.host is not None or args.port is not None:
        raise ConfigError("--uri says where to listen: give it or --host and --port, not both")
    if args.uri == STDIO_URI:
        return {}  # the one connection is the process's own stdin and stdout
    uri = urlsplit(args.uri)
    plain = not (uri.query or uri.fragment)
    if uri.scheme == "unix" and plain and not uri.netloc and uri.path:
        return {"wyoming_socket": Path(uri.path)}
    try:
        port = uri.port  # a port that is no number, or out of range, raises
    except ValueError:
        port = None
    if uri.scheme == "tcp" and plain and uri.hostname and port is not None and uri.path in ("", "/"):
        return {"host": uri.hostname, "wyoming_port": port}
    raise ConfigError(f"--uri: expected tcp://HOST:PORT, unix:///PATH or {STDIO_URI}, got {args.uri!r}")


# --- koe agent ----------------------------------------------------------------------------------------


def _register_agent(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "agent", help="serve the voice agent alone (AgentCore contract) against a remote koe TTS endpoint"
    )
    parser.add_argument(
        "--tts",
        "--tts-url",
        dest="tts",
        help="the TTS: ws://host:8080 (a koe server) or sagemaker://ENDPOINT?region=us-east-1 "
        "(default: KOE_TTS)",
    )
    parser.add_argument("--tts-api-key", help="the koe server's API key (default: KOE_API_KEY)")
    parser.add_argument("--host", help="address to listen on (default: KOE_HOST or 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port (default: KOE_PORT or 8080)")
    kinds = ["auto", "openai", "bedrock", "local", "none"]
    parser.add_argument("--llm", choices=kinds, help="which LLM (default: KOE_LLM, else auto)")
    parser.add_argument("--model", help="LLM model name or Bedrock model id (default: KOE_LLM_MODEL)")
    parser.add_argument("--base-url", help="OpenAI-compatible API root (default: KOE_LLM_BASE_URL)")
    parser.add_argument("--region", help="Bedrock region (default: KOE_LLM_REGION, then boto3's)")
    parser.add_argument("--max-tokens", type=int, help="answer length limit (default: KOE_LLM_MAX_TOKENS)")
    parser.set_defaults(handler=_run_agent)


def _run_agent(args: argparse.Namespace) -> int:
    import uvicorn

    from koe.agent.config import LLMConfig
    from koe.agent.remote import RemoteSpeaker, remote_voices
    from koe.agent.routes import create_agent_app
    from koe.agent.service import VoiceAgent
    from koe.client.target import parse_target
    from koe.errors import ConfigError
    from koe.server.origin import origin_middleware
    from koe.server.serve import uvicorn_config
    from koe.settings import AgentSettings, Settings

    tts = AgentSettings.from_env(tts=args.tts).tts
    if not tts:
        raise ConfigError(
            "koe agent needs its TTS: --tts ws://host:8080, --tts sagemaker://ENDPOINT or KOE_TTS"
        )
    target = parse_target(tts, api_key=args.tts_api_key)
    settings = Settings.from_env(host=args.host, port=args.port)
    flags = {name: getattr(args, name) for name in ("model", "base_url", "region", "max_tokens")}
    llm = LLMConfig.from_env(kind=args.llm, **flags)
    speaker = RemoteSpeaker(target, remote_voices(target))
    url = _http_url(settings)
    _announce(
        args,
        f"agent on {url} — LLM: {llm.describe()}; TTS: {target.describe()}",
        url=url,
        llm=llm.describe(),
        tts=target.describe(),
    )
    app = create_agent_app(VoiceAgent(speaker, llm), [origin_middleware(settings)])
    uvicorn.Server(uvicorn_config(app, settings)).run()
    return 0


# --- koe agent-url -------------------------------------------------------------------------------------


def _register_agent_url(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "agent-url",
        help="the browser page's link to an agent on AgentCore Runtime (presigned, or with a JWT)",
    )
    parser.add_argument("runtime_arn", help="the agent's runtime ARN (the KoeAgent stack's AgentRuntimeArn)")
    parser.add_argument("--page", default="http://127.0.0.1:8080/", help="where the page is served")
    parser.add_argument("--token", help="a JWT for a runtime with a JWT authorizer (then nothing is signed)")
    parser.add_argument("--session", help="the conversation's session id (default: a new one)")
    parser.add_argument("--expires", type=int, default=300, help="seconds the presigned URL may be opened in")
    parser.set_defaults(handler=_run_agent_url)


def _run_agent_url(args: argparse.Namespace) -> int:
    from koe.client.agentcore import RuntimeArn, page_url, presign, websocket_url

    runtime = RuntimeArn.parse(args.runtime_arn)
    url = websocket_url(runtime, args.session)
    if args.token is None:
        url = presign(url, runtime.region, expires_s=args.expires)
        _stderr.print(f"presigned for {args.expires} s: open the page within that time")
    sys.stdout.write(page_url(args.page, url, args.token) + "\n")
    return 0


# --- koe settings ------------------------------------------------------------------------------------------


def _register_settings(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("settings", help="the reference of every KOE_* variable, in Markdown")
    parser.add_argument(
        "--update",
        type=Path,
        metavar="DOC",
        help="rewrite the reference between its marker lines in DOC (docs/operations.md), not print it",
    )
    parser.set_defaults(handler=_run_settings)


def _run_settings(args: argparse.Namespace) -> int:
    from koe.settings import reference_markdown, with_reference

    if args.update is None:
        sys.stdout.write(reference_markdown())
    else:
        args.update.write_text(with_reference(args.update.read_text()))
    return 0


# --- entry point -------------------------------------------------------------------------------------------


#: The entry point group other distributions add ``koe`` subcommands through: each entry point is named
#: for its command and loads a registrar like the ``_register_<name>`` functions here.
COMMANDS_GROUP = "koe.commands"
#: The commands the benchmark package adds; without it installed they say how to install it.
_BENCH_COMMANDS = ("bench", "soak")


def _register_added(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The :data:`COMMANDS_GROUP` commands installed here, and a pointer to the benchmark package for
    each of its commands that is not."""
    from importlib.metadata import entry_points

    added = set()
    for entry in entry_points(group=COMMANDS_GROUP):
        entry.load()(subparsers)
        added.add(entry.name)
    for name in _BENCH_COMMANDS:
        if name not in added:
            # no option prefix: every word after the command, ``--help`` included, reaches the handler
            parser = subparsers.add_parser(
                name, help=f"not installed: {BENCH_INSTALL_HINT}", add_help=False, prefix_chars="\0"
            )
            parser.add_argument("arguments", nargs="*")
            parser.set_defaults(handler=_bench_not_installed)


def _bench_not_installed(args: argparse.Namespace) -> int:
    raise ConfigError(
        f"koe {args.command} is a command of the benchmark package (koe-bench), which is not installed: "
        f"{BENCH_INSTALL_HINT}",
        code="missing_extra",
    )


_REGISTRARS = (
    _register_say,
    _register_voices,
    _register_install,
    _register_doctor,
    _register_serve,
    _register_wyoming,
    _register_agent,
    _register_agent_url,
    _register_settings,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="koe", description="Streaming Kokoro-82M speech for voice agents.")
    parser.add_argument("--log-level", help="DEBUG, INFO, WARNING... (default: KOE_LOG_LEVEL or WARNING)")
    parser.add_argument(
        "--log-format",
        choices=_LOG_FORMATS,
        help="text lines or one JSON object per line (default: KOE_LOG_FORMAT or text)",
    )
    parser.add_argument(
        "--log-json", dest="log_format", action="store_const", const="json", help="--log-format json"
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    for register in _REGISTRARS:
        register(subparsers)
    _register_added(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """``koe ARGV`` (``None``: this process's own arguments)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from koe.errors import ConfigError
    from koe.settings import ProcessSettings

    try:
        process = ProcessSettings.from_env(log_level=args.log_level, log_format=args.log_format)
    except ConfigError as exc:
        parser.error(exc.message)
    args.log_format = process.log_format
    log_handler = logging.StreamHandler()
    log_handler.setFormatter(JsonFormatter() if args.log_format == "json" else TextFormatter())
    log_handler.addFilter(RedactSecrets())
    logging.basicConfig(level=process.log_level, handlers=[log_handler])
    # banners and errors reach an operator whatever the level (text mode prints them with rich)
    logger.setLevel(min(logging.getLogger().level, logging.INFO))
    if args.log_format == "json":
        logging.captureWarnings(True)  # a library's warning is a record too, not a bare text line
    handler: Handler = args.handler
    try:
        return handler(args)
    except KoeError as exc:
        _announce(args, f"error ({exc.code}): {exc.message}", level=logging.ERROR, code=exc.code)
        return 2
    except KeyboardInterrupt:
        return 130
    finally:
        if argv is None:
            # the process ends next: Python's final collection would walk every object the G2P and the
            # model left, a noticeable part of a short command such as `koe say`, and none of them needs it
            gc.freeze()


if __name__ == "__main__":
    sys.exit(main())
