"""The AWS sample's dialect: an untyped ``{"text": ...}`` request is one whole turn with its own settings,
answered with ``synthesis_start`` and ``synthesis_complete`` around PCM16 audio (docs/protocol.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koe.server.dialects.base import DialectSpec, Unframed, options
from koe.server.dialects.native import config_ack
from koe.wire.fields import request_id_field, text_field
from koe.wire.messages import (
    Cancelled,
    ClientMessage,
    Dialect,
    Request,
    ServerMessage,
    SynthesisComplete,
    SynthesisStart,
)


class AwsReplies(Unframed):
    """The AWS sample's request: its id on ``synthesis_start`` and ``synthesis_complete``, audio between."""

    def opened(self) -> list[ServerMessage]:
        return [] if self.request_id is None else [SynthesisStart(self.request_id)]

    def finished(
        self, total_s: float, first_audio_ms: float | None, elapsed_s: float, *, last: bool = False
    ) -> list[ServerMessage]:
        if self.request_id is None:
            return super().finished(total_s, first_audio_ms, elapsed_s)
        return [SynthesisComplete(self.request_id, round(total_s, 3), round(elapsed_s, 3))]


def _request(obj: Mapping[str, Any], max_chars: int) -> ClientMessage:
    return Request(
        text=text_field(obj, max_chars),
        options=options(obj),
        request_id=request_id_field(obj.get("request_id")),
    )


SPEC = DialectSpec(
    Dialect.AWS,
    messages={},
    untyped=_request,
    replies=AwsReplies,
    config_reply=config_ack,
    cancelled=Cancelled,
    pcm_only=True,
    opens_turns=False,
)
