"""The sans-I/O protocol: frames in, typed messages or errors out; messages in, exact JSON out."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koe.audio.formats import AudioFormat
from koe.errors import ConfigError, KoeError, LimitError, ProtocolError, VoiceError
from koe.server.protocol import parse_message, parse_query
from koe.wire.messages import (
    Append,
    Cancel,
    Cancelled,
    Close,
    ConfigAck,
    Configure,
    DeepgramCleared,
    DeepgramFlushed,
    Dialect,
    Error,
    Flush,
    Flushed,
    NimSessionUpdated,
    NimSpeechCompleted,
    NimSpeechData,
    Request,
    SegmentEnd,
    SegmentStart,
    SessionOptions,
    SynthesisComplete,
    SynthesisStart,
    TurnOptions,
    encode,
)

LIMITS = {"max_bytes": 4096, "max_chars": 100}


def parse(data: str | bytes) -> object:
    return parse_message(data, **LIMITS)


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        ('{"type":"append","text":"Hello, "}', Append("Hello, ", Dialect.KOE)),
        ('{"type":"flush"}', Flush(Dialect.KOE)),
        ('{"type":"cancel"}', Cancel(Dialect.KOE)),
        ('{"type":"close"}', Close(Dialect.KOE)),
        ('{"type":"Speak","text":"Hi."}', Append("Hi.", Dialect.DEEPGRAM)),
        ('{"type":"Flush"}', Flush(Dialect.DEEPGRAM)),
        ('{"type":"Clear"}', Cancel(Dialect.DEEPGRAM)),
        ('{"type":"Close"}', Close(Dialect.DEEPGRAM)),
        # pipecat's NvidiaSageMakerTTSService, message for message
        (
            '{"type":"synthesize_session.update","session":{"input_text_synthesis":{"voice_name":"bf_emma",'
            '"language_code":"en-GB"},"output_audio_params":{"sample_rate_hz":16000}}}',
            Configure(SessionOptions("bf_emma", None, 16000, None, "en-gb"), Dialect.NIM),
        ),
        ('{"type":"synthesize_session.update","session":{}}', Configure(SessionOptions(), Dialect.NIM)),
        ('{"type":"input_text.append","text":"Hi. "}', Append("Hi. ", Dialect.NIM)),
        ('{"type":"input_text.commit"}', Flush(Dialect.NIM)),
        ('{"type":"input_text.done"}', Flush(Dialect.NIM, last=True)),
        ('{"type":"session.end"}', Close(Dialect.NIM)),
        (
            '{"type":"config","voice":"bf_emma","speed":1.25,"sample_rate":16000,"format":"mulaw","lang":"en_GB"}',
            Configure(SessionOptions("bf_emma", 1.25, 16000, AudioFormat.MULAW, "en-gb")),
        ),
        ('{"type":"config"}', Configure(SessionOptions())),
        (
            '{"text":"Hello.","voice":"af_sky","speed":1,"sample_rate":8000,"request_id":"r1"}',
            Request("Hello.", SessionOptions("af_sky", 1.0, 8000), "r1"),
        ),
        ('{"text":"Hello.","request_id":7}', Request("Hello.", SessionOptions(), 7)),
        ('{"text":""}', Request("", SessionOptions(), None)),
    ],
)
def test_every_client_message_parses_from_text_and_binary_frames(frame: str, expected: object) -> None:
    assert parse(frame) == expected
    assert parse(frame.encode()) == expected


def test_unknown_fields_are_ignored_for_forward_compatibility() -> None:
    assert parse('{"type":"flush","extra":[1,2]}') == Flush(Dialect.KOE)


@pytest.mark.parametrize(
    ("frame", "error", "code", "says"),
    [
        (b"\xff\xfe", ProtocolError, "invalid_json", "UTF-8 JSON"),
        ("{not json", ProtocolError, "invalid_json", "UTF-8 JSON"),
        ('{"type":"config","speed":NaN}', ProtocolError, "invalid_json", "NaN"),
        ('{"type":"config","speed":Infinity}', ProtocolError, "invalid_json", "Infinity"),
        ("[1, 2]", ProtocolError, "invalid_message", "JSON object, got list"),
        ('{"type":"dance"}', ProtocolError, "invalid_message", "got 'dance'"),
        ('{"type":7}', ProtocolError, "invalid_message", "got 7"),
        ("{}", ProtocolError, "invalid_message", "untyped"),
        ('{"type":"append"}', ProtocolError, "invalid_message", "text to be a string, got NoneType"),
        ('{"type":"Speak","text":5}', ProtocolError, "invalid_message", "got int"),
        ('{"text":"hi","request_id":[1]}', ProtocolError, "invalid_message", "request_id"),
        ('{"text":"hi","request_id":true}', ProtocolError, "invalid_message", "request_id"),
        ('{"type":"config","speed":0}', ConfigError, "invalid_field", "speed"),
        ('{"type":"config","speed":"fast"}', ConfigError, "invalid_field", "speed"),
        ('{"type":"config","speed":true}', ConfigError, "invalid_field", "speed"),
        ('{"type":"config","sample_rate":12345}', ConfigError, "invalid_field", "sample_rate"),
        ('{"type":"config","sample_rate":16000.5}', ConfigError, "invalid_field", "sample_rate"),
        ('{"type":"config","format":"mp3"}', ConfigError, "invalid_field", "pcm_s16le, mulaw, alaw"),
        ('{"type":"config","format":"vorbis"}', ConfigError, "invalid_field", "format"),
        ('{"type":"config","format":3}', ConfigError, "invalid_field", "format"),
        ('{"type":"config","lang":"ko"}', ConfigError, "invalid_field", "lang"),
        ('{"type":"config","lang":1}', ConfigError, "invalid_field", "lang"),
        ('{"type":"config","voice":""}', ConfigError, "invalid_field", "voice"),
        ('{"type":"config","voice":["af_sky"]}', ConfigError, "invalid_field", "voice"),
        ('{"type":"config","voice":"' + "x" * 500 + '"}', ConfigError, "invalid_field", "..."),
        ('{"type":"synthesize_session.update","session":[]}', ProtocolError, "invalid_message", "session"),
        (
            '{"type":"synthesize_session.update","session":{"output_audio_params":{"audio_format":"OGG_OPUS"}}}',
            ConfigError,
            "invalid_field",
            "LINEAR_PCM only",
        ),
        (
            '{"type":"synthesize_session.update","session":{"output_audio_params":{"num_channels":2}}}',
            ConfigError,
            "invalid_field",
            "mono",
        ),
        (
            '{"type":"synthesize_session.update","session":{"input_text_synthesis":{"language_code":"de-DE"}}}',
            ConfigError,
            "invalid_field",
            "lang",
        ),
        ('{"type":"input_text.append","text":null}', ProtocolError, "invalid_message", "text"),
        ('{"type":"append","text":"' + "a" * 101 + '"}', LimitError, "text_too_long", "limit of 100"),
        ('{"type":"append","text":"' + "a" * 5000 + '"}', LimitError, "message_too_large", "4096"),
    ],
)
def test_bad_frames_raise_the_documented_error(
    frame: str | bytes, error: type[KoeError], code: str, says: str
) -> None:
    with pytest.raises(error) as raised:
        parse(frame)
    assert raised.value.code == code
    assert says in raised.value.message


def test_the_byte_limit_counts_utf8_bytes_not_characters() -> None:
    frame = '{"type":"append","text":"' + "é" * 2040 + '"}'  # 2067 characters, 4107 bytes
    with pytest.raises(LimitError, match="4107 bytes"):
        parse_message(frame, max_bytes=4096, max_chars=10_000)


#: Every code a frame's parse may fail with (docs/protocol.md's error table).
FRAME_ERRORS = {
    "invalid_json",
    "invalid_message",
    "invalid_field",
    "unknown_voice",
    "text_too_long",
    "message_too_large",
}
CLIENT_MESSAGES = (Configure, Append, Flush, Cancel, Close, Request)


def parsed_or_code(frame: str | bytes) -> object:
    """The parsed message, or the code of the ``KoeError`` it raised (any other exception propagates)."""
    try:
        return parse(frame)
    except KoeError as exc:
        return exc.code


@given(st.binary(max_size=200) | st.text(max_size=200))
def test_any_frame_gives_a_message_or_a_koe_error_never_anything_else(frame: str | bytes) -> None:
    result = parsed_or_code(frame)
    assert isinstance(result, CLIENT_MESSAGES) or result in FRAME_ERRORS, result


@given(
    st.dictionaries(
        st.sampled_from(["voice", "speed", "sample_rate", "format", "lang", "type", "text"]),
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
        max_size=7,
    )
)
def test_any_json_object_gives_a_message_or_a_koe_error(obj: dict[str, object]) -> None:
    result = parsed_or_code(json.dumps(obj))
    assert isinstance(result, CLIENT_MESSAGES) or result in FRAME_ERRORS, result
    if obj.get("type") in ("flush", "cancel", "close"):  # these carry nothing a field could spoil
        assert isinstance(result, (Flush, Cancel, Close)) and result.dialect is Dialect.KOE
    if isinstance(result, Append):
        assert result.text == obj["text"]  # what was appended is exactly what was sent


def test_query_parameters_configure_a_session_and_unknown_ones_are_ignored() -> None:
    options = parse_query(
        {
            "voice": "am_echo",
            "speed": "0.9",
            "sample_rate": "8000",
            "format": "alaw",
            "lang": "en-us",
            "model": "aura-2-helena-en",
        }
    )
    assert options == SessionOptions("am_echo", 0.9, 8000, AudioFormat.ALAW, "en-us")


@pytest.mark.parametrize(
    ("model", "voice"),
    [("aura-2-thalia-en", "af_bella"), ("aura-asteria-en", "af_sarah"), ("aura-2-draco-en", "bm_lewis"),
     ("AURA-2-HELENA-EN", "af_heart"), ("bf_emma", "bf_emma"), ("af_sky(2)+af_nova", "af_sky(2)+af_nova")],
)  # fmt: skip
def test_deepgrams_model_names_the_voice(model: str, voice: str) -> None:
    assert parse_query({"model": model}).voice == voice
    assert parse_query({"model": model, "voice": "am_echo"}).voice == "am_echo"  # voice= wins


@pytest.mark.parametrize("model", ["aura-2-nobody-en", "aura-2-thalia-es"])
def test_an_aura_model_koe_has_no_voice_for_is_refused_with_the_list(model: str) -> None:
    with pytest.raises(VoiceError, match="thalia") as raised:
        parse_query({"model": model})
    assert raised.value.code == "unknown_voice" and model in raised.value.message


def _nim_voice(name: object) -> str | None:
    update = {"type": "synthesize_session.update", "session": {"input_text_synthesis": {"voice_name": name}}}
    message = parse_message(json.dumps(update), max_bytes=1 << 16, max_chars=1000)
    assert isinstance(message, Configure) and message.dialect is Dialect.NIM
    return message.options.voice


@pytest.mark.parametrize(
    ("name", "voice"),
    [("Magpie-Multilingual.EN-US.Aria", "af_heart"), ("Magpie-Multilingual.EN-US.Aria.Happy", "af_heart"),
     ("magpie-multilingual.en-us.jason.pleasantsurprised", "am_michael"), ("bf_emma", "bf_emma"),
     ("af_sky(2)+af_nova", "af_sky(2)+af_nova")],
)  # fmt: skip
def test_nims_voice_name_is_a_magpie_voice_or_a_kokoro_one(name: str, voice: str) -> None:
    assert _nim_voice(name) == voice


@pytest.mark.parametrize(
    "name",
    [
        "Magpie-Multilingual.EN-US.Nobody",
        "Magpie-Multilingual.FR-FR.Pascal",
        "Magpie-Multilingual.EN-US.Aria.Bored",
    ],
)
def test_a_magpie_voice_koe_has_no_voice_for_is_refused_with_the_speakers(name: str) -> None:
    with pytest.raises(VoiceError, match="Aria, Diego, Isabela") as raised:
        _nim_voice(name)
    assert raised.value.code == "unknown_voice" and name in raised.value.message


def test_deepgram_encoding_names_the_format() -> None:
    assert parse_query({"encoding": "linear16"}).format is AudioFormat.PCM
    assert parse_query({"encoding": "mulaw", "format": "alaw"}).format is AudioFormat.ALAW


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"speed": "fast"}, "speed"),
        ({"speed": "nan"}, "speed"),
        ({"sample_rate": "8k"}, "sample_rate"),
        ({"format": "wav"}, "format"),
    ],
)
def test_bad_query_parameters_name_their_field(params: dict[str, str], field: str) -> None:
    with pytest.raises(ConfigError, match=field) as raised:
        parse_query(params)
    assert raised.value.code == "invalid_field"


def test_options_a_client_names_apply_over_those_in_force() -> None:
    base = TurnOptions("af_heart", 1.0, 24000, AudioFormat.PCM, "en-us")
    assert SessionOptions(speed=1.5, lang="en-gb").over(base) == TurnOptions(
        "af_heart", 1.5, 24000, AudioFormat.PCM, "en-gb"
    )
    assert SessionOptions().over(base) == base


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (
            ConfigAck("s1", "af_heart", 1.0, 24000, "pcm_s16le", "en-us"),
            {
                "type": "config",
                "session": "s1",
                "voice": "af_heart",
                "speed": 1.0,
                "sample_rate": 24000,
                "format": "pcm_s16le",
                "lang": "en-us",
            },
        ),
        (
            SegmentStart(0, 2, "Hello, world.", (7, 20)),
            {"type": "segment", "turn": 0, "index": 2, "text": "Hello, world.", "source_span": [7, 20]},
        ),
        (SegmentEnd(0, 2, 1.25), {"type": "segment_end", "turn": 0, "index": 2, "duration_s": 1.25}),
        (Flushed(3, 2.5, 812.0), {"type": "flushed", "turn": 3, "audio_s": 2.5, "ttfa_ms": 812.0}),
        (Flushed(3, 0.0, None), {"type": "flushed", "turn": 3, "audio_s": 0.0, "ttfa_ms": None}),
        (Cancelled(4), {"type": "cancelled", "turn": 4}),
        (
            Error("unknown_voice", "no such voice"),
            {"type": "error", "code": "unknown_voice", "message": "no such voice"},
        ),
        (
            Error("queue_saturated", "busy", 2.5),
            {"type": "error", "code": "queue_saturated", "message": "busy", "retry_after_s": 2.5},
        ),
        (SynthesisStart("r1"), {"type": "synthesis_start", "request_id": "r1"}),
        (
            SynthesisComplete(9, 1.5, 0.75),
            {
                "type": "synthesis_complete",
                "request_id": 9,
                "total_duration_s": 1.5,
                "elapsed_s": 0.75,
                "duration_seconds": 1.5,
                "elapsed_seconds": 0.75,
            },
        ),
        (NimSpeechData("AAA="), {"type": "conversation.item.speech.data", "audio": "AAA="}),
        (NimSpeechCompleted(), {"type": "conversation.item.speech.completed"}),
        (
            NimSessionUpdated({"output_audio_params": {"sample_rate_hz": 16000}}),
            {
                "type": "synthesize_session.updated",
                "session": {"output_audio_params": {"sample_rate_hz": 16000}},
            },
        ),
        (DeepgramFlushed(0), {"type": "Flushed", "sequence_id": 0}),
        (DeepgramCleared(1), {"type": "Cleared", "sequence_id": 1}),
    ],
)
def test_server_messages_encode_to_the_documented_json(message: object, expected: dict[str, object]) -> None:
    assert json.loads(encode(message)) == expected  # type: ignore[arg-type]
