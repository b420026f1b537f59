"""Other APIs' voice names, mapped onto Kokoro's: OpenAI's thirteen, Deepgram's Aura models and NVIDIA's
Magpie voices.

Clients written for those APIs name their own voices (pipecat's OpenAI service refuses any other name;
Deepgram's ``model`` is the voice; pipecat's NVIDIA service starts with a Magpie voice, and reconnects
whenever it is answered with an error). Each name maps to a Kokoro voice of the same gender and accent;
any Kokoro voice or blend is accepted as is. OpenAI's mapping can be changed with the ``openai_voices``
setting (docs/api.md); Aura's and Magpie's are fixed (docs/protocol.md lists them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from koe.errors import ConfigError, VoiceError

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

#: Deepgram's Aura voices (the name inside ``aura-2-<name>-en`` or ``aura-<name>-en``) → a Kokoro voice of
#: the gender and accent Deepgram gives it; pipecat's default (helena) is koe's default (af_heart).
AURA_VOICES: Mapping[str, str] = {
    # American women
    "helena": "af_heart", "thalia": "af_bella", "andromeda": "af_nicole", "asteria": "af_sarah",
    "luna": "af_sky", "stella": "af_nova", "hera": "af_alloy", "amalthea": "af_aoede", "aurora": "af_kore",
    "callista": "af_jessica", "cora": "af_river", "cordelia": "af_heart", "delia": "af_bella",
    "electra": "af_nicole", "harmonia": "af_sarah", "iris": "af_sky", "juno": "af_nova",
    "minerva": "af_alloy", "ophelia": "af_aoede", "phoebe": "af_kore", "selene": "af_jessica",
    "vesta": "af_river",
    # American men
    "apollo": "am_michael", "arcas": "am_adam", "aries": "am_echo", "atlas": "am_eric",
    "hermes": "am_fenrir", "janus": "am_liam", "jupiter": "am_onyx", "mars": "am_puck",
    "neptune": "am_michael", "odysseus": "am_adam", "orion": "am_echo", "orpheus": "am_eric",
    "perseus": "am_fenrir", "pluto": "am_liam", "saturn": "am_onyx", "zeus": "am_puck",
    # British (and Irish, Australian) voices: Kokoro's British ones
    "athena": "bf_emma", "pandora": "bf_isabella", "theia": "bf_alice", "helios": "bm_george",
    "draco": "bm_lewis", "angus": "bm_daniel", "hyperion": "bm_fable",
}  # fmt: skip
_AURA_MODEL = re.compile(r"aura(?:-2)?-(?P<name>[a-z]+)-(?P<lang>[a-z]{2})")
_AURA_LANG = "en"

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


def aura_voice(model: str) -> str:
    """The Kokoro voice for Deepgram's ``model``: an Aura model by its table, else ``model`` itself (a
    Kokoro voice or blend).

    Raises:
        VoiceError: an Aura model koe has no voice for, or in a language other than English.
    """
    match = _AURA_MODEL.fullmatch(model.strip().lower())
    if match is None:
        return model
    if match["lang"] != _AURA_LANG or match["name"] not in AURA_VOICES:
        raise VoiceError(
            f"unknown Deepgram model {model!r}: koe speaks the English Aura voices "
            f"({', '.join(sorted(AURA_VOICES))}) or any Kokoro voice (see GET /v1/audio/voices)"
        )
    return AURA_VOICES[match["name"]]


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
