"""Wyoming's framing and events, without a socket: bytes the reference library writes in, typed events out;
koe's events out, read back by the reference library; every refusal, and whether the stream goes on."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from wyoming.audio import AudioChunk as WyAudioChunk
from wyoming.audio import AudioStart as WyAudioStart
from wyoming.audio import AudioStop as WyAudioStop
from wyoming.error import Error as WyError
from wyoming.event import Event, read_event, write_event
from wyoming.info import Describe as WyDescribe
from wyoming.info import Info as WyInfo
from wyoming.ping import Ping as WyPing
from wyoming.ping import Pong as WyPong
from wyoming.tts import Synthesize as WySynthesize
from wyoming.tts import SynthesizeChunk as WySynthesizeChunk
from wyoming.tts import SynthesizeStart as WySynthesizeStart
from wyoming.tts import SynthesizeStop as WySynthesizeStop
from wyoming.tts import SynthesizeStopped as WySynthesizeStopped
from wyoming.tts import SynthesizeVoice

from koe.errors import ConfigError, KoeError, LimitError, ProtocolError
from koe.languages import CODES
from koe.wire.wyoming import (
    MAX_DATA_BYTES,
    MAX_HEADER_BYTES,
    MAX_PAYLOAD_BYTES,
    MAX_PING_CHARS,
    Attribution,
    AudioChunk,
    AudioStart,
    AudioStop,
    Describe,
    Error,
    EventDecoder,
    Info,
    InfoVoice,
    Ping,
    Pong,
    RawEvent,
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
    VoiceChoice,
    encode,
    language_tag,
    parse_event,
    wyoming_language,
)

MAX_CHARS = 1000
#: What Home Assistant sends for one streamed answer: start, the LLM's chunks, the whole text again, stop.
HOME_ASSISTANT_REQUEST = [
    WySynthesizeStart(voice=SynthesizeVoice(name="af_heart")).event(),
    WySynthesizeChunk(text="Sure, the kitchen ").event(),
    WySynthesizeChunk(text="lights are on. Anything else?").event(),
    WySynthesize(
        text="Sure, the kitchen lights are on. Anything else?", voice=SynthesizeVoice(name="af_heart")
    ).event(),
    WySynthesizeStop().event(),
]


def written(*events: Event) -> bytes:
    """The bytes the reference library writes for ``events``."""
    out = io.BytesIO()
    for event in events:
        write_event(event, out)
    return out.getvalue()


def decode_all(data: bytes, splits: list[int] = ()) -> list[RawEvent]:  # type: ignore[assignment]
    decoder = EventDecoder()
    events: list[RawEvent] = []
    last = 0
    for at in [*sorted(splits), len(data)]:
        decoder.feed(data[last:at])
        last = at
        while (event := decoder.next()) is not None:
            events.append(event)
    assert not decoder.partial
    return events


def parsed(data: bytes) -> list[object]:
    return [parse_event(event, max_chars=MAX_CHARS) for event in decode_all(data)]


def header(fields: dict[str, object]) -> bytes:
    return json.dumps(fields).encode() + b"\n"


# --- framing ---------------------------------------------------------------------------------------------


def test_home_assistants_streamed_request_reads_as_typed_events() -> None:
    assert parsed(written(*HOME_ASSISTANT_REQUEST)) == [
        SynthesizeStart(VoiceChoice(name="af_heart")),
        SynthesizeChunk("Sure, the kitchen "),
        SynthesizeChunk("lights are on. Anything else?"),
        Synthesize("Sure, the kitchen lights are on. Anything else?", VoiceChoice(name="af_heart")),
        SynthesizeStop(),
    ]


@given(st.lists(st.integers(min_value=0, max_value=len(written(*HOME_ASSISTANT_REQUEST))), max_size=12))
def test_events_decode_the_same_however_the_bytes_are_split(splits: list[int]) -> None:
    data = written(*HOME_ASSISTANT_REQUEST)
    assert decode_all(data, splits) == decode_all(data)


def test_the_data_section_is_merged_over_the_headers_data_and_payloads_are_kept() -> None:
    data = json.dumps({"text": "from the section", "extra": 1}).encode()
    event = header({"type": "x", "data": {"text": "from the header", "kept": True}, "data_length": len(data),
                    "payload_length": 3})  # fmt: skip
    [raw] = decode_all(event + data + b"abc")
    assert raw == RawEvent("x", {"text": "from the section", "kept": True, "extra": 1}, b"abc")


def test_an_event_is_partial_until_its_data_and_payload_have_all_arrived() -> None:
    decoder = EventDecoder()
    decoder.feed(b'{"type": "describe", "data_length": 2')
    assert (decoder.next(), decoder.partial, decoder.in_body) == (None, True, False)
    decoder.feed(b"}\n{")
    assert (decoder.next(), decoder.partial, decoder.in_body) == (None, True, True)
    decoder.feed(b"}")
    assert (decoder.next(), decoder.partial) == (RawEvent("describe", {}), False)


# --- refusals: the event is skipped, the next one is read ----------------------------------------------

SKIPPED = {
    "not JSON": (b"this is not json\n", "invalid_json"),
    "a blank line": (b"\n", "invalid_json"),
    "not an object": (b"[1, 2]\n", "invalid_message"),
    "no type": (header({"data": {"text": "hi"}}), "invalid_message"),
    "a type that is no string": (header({"type": 7}), "invalid_message"),
    "data that is no object": (header({"type": "synthesize", "data": "hi"}), "invalid_message"),
    "a data section that is not JSON": (
        header({"type": "synthesize", "data_length": 3}) + b"{{{",
        "invalid_json",
    ),
    "a data section nested too deep": (
        header({"type": "synthesize", "data_length": 80}) + b"[" * 40 + b"]" * 40,
        "invalid_json",
    ),
}


@pytest.mark.parametrize("name", list(SKIPPED))
def test_a_malformed_event_is_refused_and_the_next_one_is_read(name: str) -> None:
    bad, code = SKIPPED[name]
    decoder = EventDecoder()
    decoder.feed(bad + written(WyDescribe().event()))
    with pytest.raises(KoeError) as refused:
        decoder.next()
    assert refused.value.code == code
    assert not decoder.lost
    next_event = decoder.next()
    assert next_event is not None and parse_event(next_event, max_chars=MAX_CHARS) == Describe()


# --- refusals that lose the stream: every later call raises again -------------------------------------

LOST = {
    "a header line without a newline": (b"{" + b" " * MAX_HEADER_BYTES, LimitError, "message_too_large"),
    "a header line over the bound": (
        header({"type": "synthesize", "data": {"text": "x" * MAX_HEADER_BYTES}}),
        LimitError,
        "message_too_large",
    ),
    "a huge data_length": (
        header({"type": "synthesize", "data_length": MAX_DATA_BYTES + 1}),
        LimitError,
        "message_too_large",
    ),
    "a huge payload_length": (
        header({"type": "audio-chunk", "payload_length": MAX_PAYLOAD_BYTES + 1}),
        LimitError,
        "message_too_large",
    ),
    "a negative data_length": (
        header({"type": "synthesize", "data_length": -1}),
        ProtocolError,
        "invalid_message",
    ),
    "a data_length that is no number": (
        header({"type": "synthesize", "data_length": "9"}),
        ProtocolError,
        "invalid_message",
    ),
    "a payload_length that is true": (
        header({"type": "synthesize", "payload_length": True}),
        ProtocolError,
        "invalid_message",
    ),
}


@pytest.mark.parametrize("name", list(LOST))
def test_an_event_whose_end_cannot_be_known_loses_the_stream(name: str) -> None:
    bad, kind, code = LOST[name]
    decoder = EventDecoder()
    decoder.feed(bad + written(WyDescribe().event()))
    with pytest.raises(kind) as refused:
        decoder.next()
    assert refused.value.code == code
    assert decoder.lost
    with pytest.raises(kind):
        decoder.next()


def test_the_header_bound_is_exact() -> None:
    """A line of exactly the bound, newline included, is read; one byte more is refused."""
    padding = MAX_HEADER_BYTES - len(header({"type": "describe", "pad": ""}))
    line = header({"type": "describe", "pad": " " * padding})
    assert len(line) == MAX_HEADER_BYTES
    assert decode_all(line)[0].type == "describe"
    decoder = EventDecoder()
    decoder.feed(header({"type": "describe", "pad": " " * (padding + 1)}))
    with pytest.raises(LimitError):
        decoder.next()


# --- typed requests ------------------------------------------------------------------------------------


def raw(kind: str, **data: object) -> RawEvent:
    return RawEvent(kind, data)


def test_a_language_alone_chooses_by_language_and_a_name_overrides_it() -> None:
    [by_language, by_name] = parsed(
        written(
            WySynthesizeStart(voice=SynthesizeVoice(language="en_GB")).event(),
            WySynthesize(
                text="Hi.", voice=SynthesizeVoice(name="bf_emma", language="fr", speaker="x")
            ).event(),
        )
    )
    assert by_language == SynthesizeStart(VoiceChoice(language="en_GB"))
    assert by_name == Synthesize("Hi.", VoiceChoice(name="bf_emma"))


def test_no_voice_or_an_empty_one_leaves_the_choice_to_the_server() -> None:
    assert parse_event(raw("synthesize", text="Hi."), max_chars=MAX_CHARS) == Synthesize("Hi.")
    assert parse_event(raw("synthesize-start", voice={}), max_chars=MAX_CHARS) == SynthesizeStart()


@pytest.mark.parametrize(
    ("tag", "code"),
    [
        ("en-US", "en-us"),
        ("en_GB", "en-gb"),
        ("es-MX", "es"),
        ("pt_PT", "pt-br"),
        ("ja", "ja"),
        ("zh-TW", "zh"),
    ],
)
def test_language_tags_are_read_as_koes_languages_falling_back_to_the_primary_language(
    tag: str, code: str
) -> None:
    assert wyoming_language(tag).code == code


def test_a_language_kokoro_does_not_speak_is_refused_naming_those_it_does() -> None:
    with pytest.raises(ConfigError) as refused:
        wyoming_language("de-DE")
    assert refused.value.code == "invalid_field" and "en-us" in refused.value.message


def test_every_language_round_trips_through_its_advertised_tag() -> None:
    assert [language_tag(code) for code in CODES] == [
        "en-US",
        "en-GB",
        "es",
        "fr",
        "hi",
        "it",
        "ja",
        "pt-BR",
        "zh",
    ]
    assert [wyoming_language(language_tag(code)).code for code in CODES] == list(CODES)


REFUSED = {
    "a type a TTS server does not take": (raw("audio-chunk", rate=16000), ProtocolError, "invalid_message"),
    "an empty language": (raw("synthesize-start", voice={"language": " "}), ConfigError, "invalid_field"),
    "a language that is no string": (
        raw("synthesize-start", voice={"language": 7}),
        ConfigError,
        "invalid_field",
    ),
    "a voice that is no object": (
        raw("synthesize", text="Hi.", voice="af_heart"),
        ConfigError,
        "invalid_field",
    ),
    "a voice name that is empty": (
        raw("synthesize", text="Hi.", voice={"name": " "}),
        ConfigError,
        "invalid_field",
    ),
    "a text format koe does not read": (
        raw("synthesize-start", text_format="markdown"),
        ConfigError,
        "invalid_field",
    ),
    "a text that is no string": (raw("synthesize-chunk", text=None), ProtocolError, "invalid_message"),
    "a text over the bound": (raw("synthesize", text="x" * (MAX_CHARS + 1)), LimitError, "text_too_long"),
    "a ping's text that is no string": (raw("ping", text=["x"]), ProtocolError, "invalid_message"),
    "a ping's text over its bound": (
        raw("ping", text="x" * (MAX_PING_CHARS + 1)),
        LimitError,
        "text_too_long",
    ),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_requests_koe_cannot_answer_are_refused_saying_why(name: str) -> None:
    event, kind, code = REFUSED[name]
    with pytest.raises(kind) as refused:
        parse_event(event, max_chars=MAX_CHARS)
    assert refused.value.code == code
    assert len(refused.value.message) < 400  # a bounded preview, never the whole input


def test_plain_text_and_ssml_text_formats_are_accepted() -> None:
    assert parse_event(raw("synthesize", text="Hi.", text_format="text"), max_chars=MAX_CHARS) == Synthesize(
        "Hi."
    )
    ssml = raw("synthesize", text="Hi <break/>", text_format="ssml")
    assert parse_event(ssml, max_chars=MAX_CHARS) == Synthesize("Hi <break/>", ssml=True)
    assert parse_event(raw("synthesize-start", text_format="ssml"), max_chars=MAX_CHARS) == SynthesizeStart(
        ssml=True
    )


# --- answers, read back by the reference library --------------------------------------------------------


def read_back(data: bytes) -> list[Event]:
    stream = io.BytesIO(data)
    events = []
    while (event := read_event(stream)) is not None:
        events.append(event)
    return events


def test_answers_read_back_through_the_reference_library() -> None:
    info = Info(
        "koe",
        "a description",
        "0.1.0",
        Attribution("someone", "https://example.com"),
        [InfoVoice("af_heart", ("en-US",), "af_heart (American English, female)")],
    )
    pcm = bytes(range(256)) * 4
    events = read_back(
        b"".join(
            encode(e)
            for e in [
                info,
                AudioStart(24_000),
                AudioChunk(24_000, pcm),
                AudioStop(),
                SynthesizeStopped(),
                Error("x", "why"),
            ]
        )
    )
    [tts] = WyInfo.from_event(events[0]).tts
    assert (tts.name, tts.version, tts.installed, tts.supports_synthesize_streaming) == (
        "koe",
        "0.1.0",
        True,
        True,
    )
    [voice] = tts.voices
    assert (voice.name, voice.languages, voice.description) == (
        "af_heart",
        ["en-US"],
        "af_heart (American English, female)",
    )
    start = WyAudioStart.from_event(events[1])
    chunk = WyAudioChunk.from_event(events[2])
    assert (start.rate, start.width, start.channels) == (24_000, 2, 1)
    assert (chunk.rate, chunk.width, chunk.channels, chunk.audio) == (24_000, 2, 1, pcm)
    assert WyAudioStop.is_type(events[3].type) and WySynthesizeStopped.is_type(events[4].type)
    error = WyError.from_event(events[5])
    assert (error.code, error.text) == ("x", "why")


def test_a_ping_reads_as_typed_and_its_pong_echoes_its_text_through_the_reference_library() -> None:
    assert parsed(written(WyPing(text="are you there").event(), WyPing().event())) == [
        Ping("are you there"),
        Ping(None),
    ]
    assert parse_event(raw("ping", text="x" * MAX_PING_CHARS), max_chars=1) == Ping("x" * MAX_PING_CHARS)
    echoes = [WyPong.from_event(e) for e in read_back(encode(Pong("are you there")) + encode(Pong()))]
    assert echoes == [WyPong(text="are you there"), WyPong(text=None)]


def test_an_answers_header_line_stays_short_whatever_its_data_holds() -> None:
    """Data goes after the line: a client reading lines with a small limit still reads a big ``info``."""
    voices = [InfoVoice(f"v{n}", ("en-US",), "x" * 500) for n in range(200)]
    data = encode(Info("koe", "d", "1", Attribution("a", "b"), voices))
    line, _, rest = data.partition(b"\n")
    assert len(line) < 200 and len(rest) == json.loads(line)["data_length"] > 100_000
