"""NVIDIA NIM's realtime TTS dialect, the protocol of pipecat's NVIDIA SageMaker TTS service:
``synthesize_session.update``, ``input_text.append``/``commit``/``done`` and ``session.end``, answered with
base64 PCM16 in ``conversation.item.speech.data`` text frames; ``voice_name`` names a Magpie voice, mapped
onto a Kokoro voice of the speaker's gender (docs/protocol.md lists them).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any

from koe.errors import ConfigError, ProtocolError, VoiceError
from koe.pipeline.voice import Voice
from koe.server.dialects.base import DialectSpec, appended, constant, options
from koe.server.dialects.deepgram import DeepgramReplies
from koe.wire.fields import preview
from koe.wire.messages import (
    Cancelled,
    ClientMessage,
    Close,
    Configure,
    Dialect,
    Flush,
    NimCommitted,
    NimSessionUpdated,
    NimSpeechCompleted,
    NimSpeechData,
    ServerMessage,
    SessionOptions,
    TurnOptions,
    encode,
)

#: NIM's only audio format: the PCM16 koe sends base64-encoded in ``conversation.item.speech.data``.
NIM_AUDIO_FORMAT = "LINEAR_PCM"

#: NVIDIA's Magpie speakers (``Magpie-Multilingual.EN-US.<Speaker>``, NIM's names) → a Kokoro voice of the
#: speaker's gender; pipecat's NVIDIA default (Aria) is koe's default (af_heart).
MAGPIE_VOICES: Mapping[str, str] = {
    "aria": "af_heart", "sofia": "af_bella", "mia": "af_nicole", "louise": "af_sarah", "isabela": "af_sky",
    "jason": "am_michael", "leo": "am_adam", "ray": "am_echo", "diego": "am_eric", "pascal": "am_fenrir",
    "long": "am_liam",
}  # fmt: skip
#: The emotional styles a Magpie name may end with; Kokoro has none, so the speaker's voice speaks them all.
MAGPIE_EMOTIONS = frozenset(
    {"neutral", "calm", "happy", "sad", "angry", "fearful", "disgusted", "pleasantsurprised"}
)
_MAGPIE_VOICE = re.compile(
    r"magpie-multilingual\.(?P<locale>[a-z]{2}-[a-z]{2})\.(?P<name>[a-z]+)(?:\.(?P<emotion>[a-z]+))?"
)
_MAGPIE_LOCALE = "en-us"


def magpie_voice(name: str) -> str:
    """The Kokoro voice for NIM's ``voice_name``: a Magpie voice by its table, else ``name`` itself (a Kokoro
    voice or blend).

    Raises:
        VoiceError: a Magpie voice koe has no voice for: another speaker, locale or emotion.
    """
    match = _MAGPIE_VOICE.fullmatch(name.strip().lower())
    if match is None:
        return name
    emotion = match["emotion"]
    if (
        match["locale"] != _MAGPIE_LOCALE
        or match["name"] not in MAGPIE_VOICES
        or (emotion is not None and emotion not in MAGPIE_EMOTIONS)
    ):
        speakers = ", ".join(sorted(speaker.title() for speaker in MAGPIE_VOICES))
        raise VoiceError(
            f"unknown Magpie voice {name!r}: koe speaks Magpie-Multilingual.EN-US.<Speaker>[.<Emotion>] "
            f"with the speakers {speakers}, or any Kokoro voice (see GET /v1/audio/voices)"
        )
    return MAGPIE_VOICES[match["name"]]


class NimReplies(DeepgramReplies):
    """NIM's realtime TTS events: base64 audio in JSON, and the completion only after ``input_text.done``
    (pipecat's NVIDIA service reconnects when it reads it, so a commit must not send it)."""

    def audio(self, frame: bytes) -> str | bytes:
        return encode(NimSpeechData(base64.b64encode(frame).decode("ascii")))

    def finished(
        self, total_s: float, first_audio_ms: float | None, elapsed_s: float, *, last: bool = False
    ) -> list[ServerMessage]:
        return [NimSpeechCompleted()] if last else []


def config_reply(session: str, voice: Voice, options: TurnOptions) -> ServerMessage:
    """The settings in force, in NIM's ``synthesize_session`` shape."""
    return NimSessionUpdated(
        {
            "id": session,
            "object": "realtime.synthesize_session",
            "input_text_synthesis": {"voice_name": voice.spec, "language_code": _bcp47(voice.lang)},
            "output_audio_params": {
                "sample_rate_hz": options.sample_rate,
                "num_channels": 1,
                "audio_format": NIM_AUDIO_FORMAT,
            },
        }
    )


def _bcp47(lang: str) -> str:
    """``en-us`` as NIM writes it: ``en-US``."""
    language, _, region = lang.partition("-")
    return f"{language}-{region.upper()}" if region else language


def _nim_options(obj: Mapping[str, Any]) -> SessionOptions:
    """NIM's ``session``: ``input_text_synthesis`` {voice_name, language_code} and ``output_audio_params``
    {sample_rate_hz, num_channels, audio_format}; each part optional. ``voice_name`` is a Magpie voice or a
    Kokoro voice (:func:`magpie_voice`)."""
    session = _section(obj, "session")
    voice = _section(session, "input_text_synthesis")
    audio = _section(session, "output_audio_params")
    audio_format = audio.get("audio_format")
    if audio_format not in (None, NIM_AUDIO_FORMAT):
        raise ConfigError(
            f"output_audio_params.audio_format: koe sends {NIM_AUDIO_FORMAT} only, "
            f"got {preview(audio_format)}",
            code="invalid_field",
        )
    if audio.get("num_channels") not in (None, 1):
        raise ConfigError(
            f"output_audio_params.num_channels: koe sends mono (1), got {preview(audio['num_channels'])}",
            code="invalid_field",
        )
    name = voice.get("voice_name")
    return options(
        {
            "voice": magpie_voice(name) if isinstance(name, str) else name,
            "lang": voice.get("language_code"),
            "sample_rate": audio.get("sample_rate_hz"),
        }
    )


def _section(obj: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = obj.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ProtocolError(f"expected {name} to be an object, got {type(value).__name__}")
    return value


def _update(obj: Mapping[str, Any], max_chars: int) -> ClientMessage:
    return Configure(_nim_options(obj), Dialect.NIM)


SPEC = DialectSpec(
    Dialect.NIM,
    messages={
        "synthesize_session.update": _update,
        "input_text.append": appended(Dialect.NIM),
        "input_text.commit": constant(Flush(Dialect.NIM)),
        "input_text.done": constant(Flush(Dialect.NIM, last=True)),
        "session.end": constant(Close(Dialect.NIM)),
    },
    replies=NimReplies,
    config_reply=config_reply,
    cancelled=Cancelled,
    flush_ack=NimCommitted(),
    pcm_only=True,
)
