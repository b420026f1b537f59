"""Deepgram's streaming TTS dialect: ``Speak``/``Flush``/``Clear``/``Close``, answered with audio only and
``Flushed``/``Cleared`` carrying the turn as ``sequence_id``; ``model`` names an Aura voice, mapped onto a
Kokoro voice of the same gender and accent (docs/protocol.md lists them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from koe.errors import VoiceError
from koe.server.dialects.base import DialectSpec, Unframed, appended, constant
from koe.server.dialects.native import config_ack
from koe.wire.messages import (
    Cancel,
    Close,
    DeepgramCleared,
    DeepgramFlushed,
    Dialect,
    Flush,
    ServerMessage,
)

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


class DeepgramReplies(Unframed):
    """Deepgram-style clients: audio, then ``Flushed`` with the turn as its ``sequence_id``."""

    def finished(
        self, total_s: float, first_audio_ms: float | None, elapsed_s: float, *, last: bool = False
    ) -> list[ServerMessage]:
        return [DeepgramFlushed(self.turn)]


SPEC = DialectSpec(
    Dialect.DEEPGRAM,
    messages={
        "Speak": appended(Dialect.DEEPGRAM),
        "Flush": constant(Flush(Dialect.DEEPGRAM)),
        "Clear": constant(Cancel(Dialect.DEEPGRAM)),
        "Close": constant(Close(Dialect.DEEPGRAM)),
    },
    replies=DeepgramReplies,
    config_reply=config_ack,
    cancelled=DeepgramCleared,
)
