"""Inline pronunciation markup in the text layer: parsed, kept as written for the pipeline, never cut inside
or spoken half, however the text is streamed."""

from __future__ import annotations

import pytest

from koe.errors import ConfigError
from koe.text.languages.lookup import segmenter_for
from koe.text.markup import MAX_PAUSE_S, PauseRun, PhonemeRun, TextRun, runs, spans
from koe.text.normalize import normalize
from koe.text.segment import Segment, Segmenter

#: Elements with a clause's and a sentence's mark inside them, where a cut would otherwise fall.
STREAMED = (
    "Okay now [Ready, set, go](/ɹˈɛdi, sˈɛt, ɡˈO/) he said. Sure, say [Kokoro](/kˈOkəɹO/) twice. "
    "Then wait [pause:0.5s] and go on, [New York](/nˈu jˈɔɹk/) is big. "
    "One more [pause:250ms] pause and [tomato](/təmˈɑtO/). Done."
)


def _segments(pieces: list[str], limit: int | None = None) -> list[Segment]:
    segmenter = Segmenter()
    segmenter.set_next_limit(limit)
    out: list[Segment] = []
    for piece in pieces:
        out += segmenter.feed(piece)
    return out + segmenter.flush()


def _shape(segments: list[Segment]) -> list[tuple[str, str, tuple[int, int]]]:
    return [(s.text, s.spoken_text, s.source_span) for s in segments]


def test_runs_split_text_phonemes_and_pauses() -> None:
    text = "Say [tomato](/təmˈɑtO/) now [pause:500ms] ok"
    assert runs(text) == [
        TextRun(0, 4),
        PhonemeRun(5, 11, "təmˈɑtO"),
        TextRun(23, 28),
        PauseRun(0.5),
        TextRun(41, 44),
    ]
    assert text[5:11] == "tomato"


@pytest.mark.parametrize(
    ("element", "seconds"),
    [("[pause:0.5s]", 0.5), ("[pause:500ms]", 0.5), ("[pause:2s]", 2.0), ("[pause:10s]", MAX_PAUSE_S)],
)
def test_pause_lengths_in_seconds_or_milliseconds(element: str, seconds: float) -> None:
    assert runs(element) == [PauseRun(seconds)]


@pytest.mark.parametrize(
    "element",
    ["[pause:10.5s]", "[pause:99999s]", "[pause:99999999999999999999s]", "[pause:abc]", "[pause:]",
     "[pause:-1s]", "[pause:5 minutes]"],
)  # fmt: skip
def test_a_pause_that_is_no_length_or_too_long_is_invalid_markup(element: str) -> None:
    with pytest.raises(ConfigError) as error:
        runs(f"Wait {element} here.")
    assert error.value.code == "invalid_markup"


@pytest.mark.parametrize("tail", ["[Kokoro](/kˈOk", "[Kokoro](/", "[Kokoro](/kˈOkəɹO/", "[pause:0.5"])
def test_text_ending_inside_an_element_is_invalid_markup(tail: str) -> None:
    with pytest.raises(ConfigError) as error:
        runs(f"Say {tail}")
    assert error.value.code == "invalid_markup"


def test_normalizer_keeps_elements_as_written_and_the_word_points_at_its_source() -> None:
    source = "Say **[tomato](/təmˈɑtO/)** and [pause:1s] wait."
    normalized = normalize(source)
    assert normalized.spoken == "Say [tomato](/təmˈɑtO/) and [pause:1s] wait."
    word = normalized.spoken.index("tomato")
    start, end = normalized.alignment.source_span(word, word + len("tomato"))
    assert source[start:end] == "tomato"


def test_every_language_keeps_elements_for_the_pipeline() -> None:
    for lang in ("en-us", "es", "fr", "hi", "it", "ja", "pt-br", "zh"):
        segmenter = segmenter_for(lang)
        segments = (*segmenter.feed("[Kokoro](/kˈOkəɹO/) [pause:1s]"), *segmenter.flush())
        spoken = " ".join(s.spoken_text for s in segments)
        assert "[Kokoro](/kˈOkəɹO/)" in spoken and "[pause:1s]" in spoken, lang


def test_markup_split_at_every_byte_gives_the_segments_sent_whole() -> None:
    whole = _shape(_segments([STREAMED]))
    assert len(whole) > 1
    for cut in range(1, len(STREAMED)):
        assert _shape(_segments([STREAMED[:cut], STREAMED[cut:]])) == whole, cut
    assert _shape(_segments(list(STREAMED))) == whole


@pytest.mark.parametrize("limit", [5, 12, 20, 40])
def test_no_segment_is_cut_inside_an_element(limit: int) -> None:
    elements = spans(STREAMED)
    for segment in _segments(list(STREAMED), limit):
        start, end = segment.source_span
        for a, b in elements:
            assert b <= start or a >= end or (start <= a and b <= end), (segment.text, STREAMED[a:b])


def test_a_half_element_is_held_until_it_closes() -> None:
    segmenter = Segmenter()
    said = [s.text for s in segmenter.feed("Hello there, my friend. This is [Ko")]
    said += [s.text for s in segmenter.feed("koro](/kˈOk")]
    assert said == ["Hello there, my friend."]
    later = segmenter.feed("əɹO/) speaking. And more. ")
    assert [s.text for s in later] == ["This is [Kokoro](/kˈOkəɹO/) speaking."]


def test_an_element_open_at_flush_fails_only_its_own_segment() -> None:
    segments = _segments(["Hello there, my friend.\n", "This is [Ko", "koro](/kˈOk"])
    assert [s.text for s in segments] == ["Hello there, my friend.", "This is [Kokoro](/kˈOk"]
    assert runs(segments[0].spoken_text) == [TextRun(0, len(segments[0].spoken_text))]
    with pytest.raises(ConfigError) as error:
        runs(segments[1].spoken_text)
    assert error.value.code == "invalid_markup"


def test_a_markdown_link_is_still_a_link() -> None:
    assert normalize("Read [the docs](https://example.com/docs) now.").spoken == "Read the docs now."
    assert spans("Read [the docs](https://example.com/docs) now.") == []
