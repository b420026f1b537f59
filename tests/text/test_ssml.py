"""The SSML subset read into koe's text and markup: never a tag read aloud, every spoken character pointing
at the SSML it came from, malformed or hostile SSML a bounded ``invalid_markup`` error."""

from __future__ import annotations

import time

import pytest

from koe.errors import ConfigError
from koe.text.segment import Segment, Segmenter
from koe.text.ssml import MAX_DEPTH, MAX_ELEMENTS, Style, is_ssml, located, read

#: Refusing hostile SSML takes well under this (it is parsed once, its events bounded).
BOUNDED_S = 0.5


def _spoken(ssml: str) -> str:
    return " ".join(s.spoken_text for s in _segments(ssml))


def _segments(ssml: str) -> list[Segment]:
    said = read(ssml)
    segmenter = Segmenter()
    return [located(s, said, ssml) for s in (*segmenter.feed(said.text), *segmenter.flush())]


def _refused(ssml: str) -> str:
    with pytest.raises(ConfigError) as error:
        read(ssml)
    assert error.value.code == "invalid_markup"
    return error.value.message


@pytest.mark.parametrize(
    ("text", "ssml"),
    [("<speak>Hi</speak>", True), ("  <speak xml:lang='en'>Hi</speak>", True), ("<spe", None), ("", None),
     ("Hello <speak>", False), ("<b>Hi</b>", False), ("<speakers>", False)],
)  # fmt: skip
def test_ssml_is_a_text_that_starts_with_speak(text: str, ssml: bool | None) -> None:
    assert is_ssml(text) is ssml


def test_a_break_is_a_pause_and_no_tag_is_spoken() -> None:
    ssml = '<speak>Hello there. <break time="900ms"/> Welcome back.</speak>'
    assert read(ssml).text == "Hello there.  [pause:900ms]  Welcome back."
    assert "speak" not in _spoken(ssml) and "break" not in _spoken(ssml)


@pytest.mark.parametrize(
    ("element", "pause"),
    [('<break time="1.5s"/>', "[pause:1500ms]"), ('<break strength="strong"/>', "[pause:700ms]"),
     ("<break/>", "[pause:400ms]")],
)  # fmt: skip
def test_break_time_and_strength(element: str, pause: str) -> None:
    assert pause in read(f"<speak>One {element} two</speak>").text


def test_break_strength_none_is_no_pause() -> None:
    assert "pause" not in read('<speak>One <break strength="none"/> two</speak>').text


def test_phoneme_in_ipa_becomes_kokoro_s_symbols_and_its_word_points_at_the_written_word() -> None:
    ssml = '<speak>Say <phoneme alphabet="ipa" ph="təˈmeɪtoʊ">tomato</phoneme>.</speak>'
    (segment,) = _segments(ssml)
    assert segment.spoken_text == "Say [tomato](/təˈmAtO/)."
    word = segment.spoken_text.index("tomato")
    start, end = segment.alignment.source_span(word, word + len("tomato"))
    assert ssml[start:end] == "tomato"


def test_phoneme_in_kokoro_s_alphabet_is_taken_as_written() -> None:
    assert (
        "[Kokoro](/kˈOkəɹO/)"
        in read('<speak><phoneme alphabet="kokoro" ph="kˈOkəɹO">Kokoro</phoneme></speak>').text
    )


def test_sub_says_its_alias_and_points_at_the_element() -> None:
    ssml = '<speak>Visit the <sub alias="World Wide Web">WWW</sub> today.</speak>'
    (segment,) = _segments(ssml)
    assert segment.spoken_text == "Visit the World Wide Web today."
    word = segment.spoken_text.index("World")
    start, end = segment.alignment.source_span(word, word + len("World Wide Web"))
    assert ssml[start:end] == '<sub alias="World Wide Web">WWW</sub>'
    assert segment.text == ssml[segment.source_span[0] : segment.source_span[1]]


@pytest.mark.parametrize(
    ("element", "said"),
    [('<say-as interpret-as="characters">koe</say-as>', "K O E"),
     ('<say-as interpret-as="spell-out">IBM</say-as>', "I B M"),
     ('<say-as interpret-as="digits">2025</say-as>', "2 0 2 5"),
     ('<say-as interpret-as="ordinal">3</say-as>', "3rd"),
     ('<say-as interpret-as="ordinal">12</say-as>', "12th"),
     ('<say-as interpret-as="cardinal">1,250</say-as>', "1,250"),
     ('<say-as interpret-as="date">2025-03-01</say-as>', "March 1st, 2025"),
     ('<say-as interpret-as="time">14:05</say-as>', "14 oh 5"),
     ('<say-as interpret-as="telephone">555-1234</say-as>', "five five five, one two three four")],
)  # fmt: skip
def test_say_as_reads_as_its_kind(element: str, said: str) -> None:
    assert said in _spoken(f"<speak>It is {element} now.</speak>")


def test_paragraphs_and_sentences_end_segments() -> None:
    segments = _segments("<speak><p><s>First one here</s><s>Second one</s></p><p>Third part</p></speak>")
    assert [s.spoken_text for s in segments] == ["First one here", "Second one", "Third part"]
    assert segments[2].text == "Third part"


def test_unknown_elements_are_read_as_their_text() -> None:
    ssml = (
        '<speak><emphasis level="strong">Very</emphasis> <prosody pitch="high">good</prosody> '
        "<x-y>news</x-y></speak>"
    )
    assert _spoken(ssml) == "Very good news"


def test_an_entity_is_read_and_points_at_itself() -> None:
    ssml = "<speak>Salt &amp; pepper</speak>"
    (segment,) = _segments(ssml)
    assert segment.spoken_text == "Salt & pepper"
    amp = segment.spoken_text.index("&")
    start, end = segment.alignment.source_span(amp, amp + 1)
    assert ssml[start:end] == "&amp;"
    assert segment.text == "Salt &amp; pepper"


@pytest.mark.parametrize(
    ("ssml", "says"),
    [("<speak>Hello <break time=", "line 1, column"),
     ("<speak>Hello <s>there</speak>", "mismatched tag"),
     ("<speak>Hello", "line 1"),
     ("<speak>Hi</speak><speak>again</speak>", "junk after document element"),
     ('<speak>Wait <break time="99999999999999999999s"/></speak>', "pause length"),
     ('<speak>Wait <break time="11s"/></speak>', "at most 10 s"),
     ('<speak>Wait <break strength="loud"/></speak>', "strength"),
     ('<speak><phoneme alphabet="x-sampa" ph="t@">to</phoneme></speak>', "ipa or kokoro"),
     ('<speak><phoneme ph="">to</phoneme></speak>', "<phoneme ph>"),
     ('<speak><phoneme ph="tu"></phoneme></speak>', "one word")],
)  # fmt: skip
def test_malformed_ssml_is_invalid_markup_saying_where(ssml: str, says: str) -> None:
    assert says in _refused(ssml)


def test_a_document_type_is_refused_so_no_entity_is_ever_expanded() -> None:
    laughs = (
        '<?xml version="1.0"?><!DOCTYPE speak [<!ENTITY a "lol"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>'
        "<speak>&b;</speak>"
    )
    assert "document type" in _refused(laughs)


@pytest.mark.serial
@pytest.mark.parametrize(
    ("ssml", "says"),
    [("<speak>" + "<s>" * 10_000 + "deep" + "</s>" * 10_000 + "</speak>", f"at most {MAX_DEPTH} deep"),
     ("<speak>" + "<break/>" * 10_000 + "</speak>", f"at most {MAX_ELEMENTS} elements")],
)  # fmt: skip
def test_hostile_ssml_is_refused_in_bounded_time(ssml: str, says: str) -> None:
    started = time.perf_counter()
    assert says in _refused(ssml)
    assert time.perf_counter() - started < BOUNDED_S


def test_prosody_and_lang_give_their_span_a_style_and_end_a_segment_at_each_edge() -> None:
    ssml = (
        '<speak>Hello there <prosody rate="slow">take it slowly</prosody> and '
        '<lang xml:lang="fr-FR">bonjour <prosody rate="150%">vite</prosody></lang> the end.</speak>'
    )
    said = read(ssml)
    assert [(part.strip(), style) for part, style in said.parts() if part.strip()] == [
        ("Hello there", Style()),
        ("take it slowly", Style(rate=0.8)),
        ("and", Style()),
        ("bonjour", Style(lang="fr")),
        ("vite", Style(rate=1.5, lang="fr")),
        ("the end.", Style()),
    ]
    assert [s.text for s in _segments(ssml)] == [
        "Hello there",
        "take it slowly",
        "and",
        "bonjour",
        "vite",
        "the end.",
    ]


@pytest.mark.parametrize(
    ("rate", "times"),
    [("x-slow", 0.6), ("fast", 1.25), ("80%", 0.8), ("+20%", 1.2), ("-50%", 0.5), ("1.3", 1.3),
     ("+0.5", 1.5), (" Medium ", 1.0)],
)  # fmt: skip
def test_prosody_rate_reads_as_a_multiple_of_the_speed(rate: str, times: float) -> None:
    said = read(f'<speak>a <prosody rate="{rate}">b</prosody></speak>')
    assert said.style_at(said.text.index("b")).rate == pytest.approx(times)


def test_nested_rates_multiply_and_the_root_can_name_the_language() -> None:
    said = read(
        '<speak xml:lang="es"><prosody rate="50%">a <prosody rate="x-fast">b</prosody></prosody></speak>'
    )
    assert said.style_at(said.text.index("a")) == Style(rate=0.5, lang="es")
    assert said.style_at(said.text.index("b")) == Style(rate=0.75, lang="es")


@pytest.mark.parametrize(
    ("ssml", "says"),
    [('<speak><prosody rate="warp">x</prosody></speak>', "expected <prosody rate> one of"),
     ('<speak><prosody rate="-100%">x</prosody></speak>', "above zero"),
     ('<speak><prosody rate="99999999%">x</prosody></speak>', "expected <prosody rate>"),
     ('<speak><lang xml:lang="de">x</lang></speak>', "<lang xml:lang>: lang must be one of")],
)  # fmt: skip
def test_a_rate_or_language_koe_cannot_honour_is_invalid_markup_saying_where(ssml: str, says: str) -> None:
    message = _refused(ssml)
    assert says in message and "(at character 7)" in message
