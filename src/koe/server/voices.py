"""OpenAI's thirteen voice names, mapped onto Kokoro's (Deepgram's Aura names are
:mod:`koe.server.dialects.deepgram`'s, NVIDIA's Magpie names :mod:`koe.server.dialects.nim`'s).

Clients written for OpenAI's API name its voices (pipecat's OpenAI service refuses any other name). Each
name maps to a Kokoro voice of the same gender and accent; any Kokoro voice or blend is accepted as is. The
mapping can be changed with the ``openai_voices`` setting (docs/api.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from koe.errors import ConfigError

#: OpenAI's voices → the closest Kokoro voice (same name where Kokoro has one).
OPENAI_VOICES: Mapping[str, str] = {
    "alloy": "af_alloy",
    "ash": "am_adam",
    "ballad": "bm_george",
    "coral": "af_heart",
    "echo": "am_echo",
    "fable": "bm_fable",
    "nova": "af_nova",
    "onyx": "am_onyx",
    "sage": "af_sarah",
    "shimmer": "af_sky",
    "verse": "am_michael",
    "marin": "af_bella",
    "cedar": "am_eric",
}


def openai_voices(overrides: Iterable[str]) -> dict[str, str]:
    """OpenAI's names mapped to Kokoro voices, with ``overrides`` (``"alloy=af_bella"`` pairs) applied.

    Raises:
        ConfigError: a pair is malformed or names no OpenAI voice (the ``openai_voices`` setting).
    """
    voices = dict(OPENAI_VOICES)
    for pair in overrides:
        name, _, voice = pair.partition("=")
        name, voice = name.strip().lower(), voice.strip()
        if name not in OPENAI_VOICES or not voice:
            raise ConfigError(
                f"setting openai_voices: expected NAME=VOICE pairs with NAME one of "
                f"{', '.join(OPENAI_VOICES)}, got {pair!r}",
                code="invalid_field",
            )
        voices[name] = voice
    return voices
