"""Word timings pointed back at the written text, and their place in the protocol (no model, no server)."""

from __future__ import annotations

import itertools
import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koe.engine.timing import WordTiming
from koe.errors import ConfigError, ProtocolError
from koe.pipeline.words import written_words
from koe.server.protocol import parse_message, parse_query
from koe.text.segment import Segment, Segmenter
from koe.wire.messages import Configure, SessionOptions, Words, decode, encode
from koe.wire.words import SpokenWord

WORD_S = 0.3  # a made-up duration per spoken word: what matters here is the text side


def _segments(text: str) -> list[Segment]:
    segmenter = Segmenter()
    return [*segmenter.feed(text), *segmenter.flush()]


def _timed(segment: Segment) -> list[WordTiming]:
    """Each spoken word of the segment, one after another (what G2P + durations give, for a real text)."""
    return [
        WordTiming(m.start(), m.end(), k * WORD_S, (k + 1) * WORD_S)
        for k, m in enumerate(re.finditer(r"[\w$%.']*\w%?", segment.spoken_text))
    ]


def test_markdown_and_urls_map_to_the_written_words() -> None:
    text = "Read **the guide** at https://example.com/docs today. Mail bob@example.org, thanks!"
    turn: list[SpokenWord] = []
    for segment in _segments(text):
        turn += written_words(segment, _timed(segment))
    assert [w.word for w in turn] == [
        "Read", "the", "guide", "at", "https://example.com/docs", "today",
        "Mail", "bob@example.org", "thanks",
    ]  # fmt: skip
    assert all(text[a:b] == w.word for w in turn for a, b in [w.source_span])
    url = turn[4]
    assert (url.start_s, url.end_s) == (4 * WORD_S, 7 * WORD_S)  # "example dot com": three spoken words


def test_a_dates_spoken_words_merge_into_the_date_and_shifts_add() -> None:
    (segment,) = _segments("It opens on 2024-01-05.")
    words = written_words(segment, _timed(segment))
    assert [w.word for w in words] == ["It", "opens", "on", "2024-01-05"]
    assert words[0].start_s == 0.0
    assert words[-1].end_s == pytest.approx(6 * WORD_S)  # January 5th, 2024
    assert words[-1].shifted(2.0).start_s == pytest.approx(words[-1].start_s + 2.0)


@given(
    st.lists(
        st.sampled_from(["Hi", "**bold**", "`code`", "x.com", "3.5%", "2024-01-05", "-", "🙂"]), max_size=12
    )
)
def test_written_words_are_monotonic_in_time_and_text(tokens: list[str]) -> None:
    text = " ".join(tokens) + "."
    for segment in _segments(text):
        words = written_words(segment, _timed(segment))
        for before, after in itertools.pairwise(words):
            assert before.end_s <= after.start_s and before.source_span[1] <= after.source_span[0]
        for w in words:
            assert w.start_s < w.end_s and text[w.source_span[0] : w.source_span[1]] == w.word


def test_the_words_option_parses_from_config_and_query() -> None:
    assert parse_message('{"type":"config","words":true}', max_bytes=1000, max_chars=100) == Configure(
        SessionOptions(words=True)
    )
    assert parse_query({"words": "false"}) == SessionOptions(words=False)
    assert parse_query({"words": "TRUE"}) == SessionOptions(words=True)
    for bad in ('{"type":"config","words":"yes"}', '{"type":"config","words":1}'):
        with pytest.raises(ConfigError, match="words must be true or false"):
            parse_message(bad, max_bytes=1000, max_chars=100)
    with pytest.raises(ConfigError, match="words"):
        parse_query({"words": "maybe"})


def test_the_words_message_encodes_as_documented_and_the_client_decodes_it() -> None:
    message = Words(
        2, 1, (SpokenWord("café", 0.125, 0.5, (4, 8)), SpokenWord("https://x.io", 0.5, 1.4, (9, 21)))
    )
    text = encode(message)
    assert json.loads(text) == {
        "type": "words",
        "turn": 2,
        "index": 1,
        "words": [
            {"word": "café", "start_s": 0.125, "end_s": 0.5, "source_span": [4, 8]},
            {"word": "https://x.io", "start_s": 0.5, "end_s": 1.4, "source_span": [9, 21]},
        ],
    }
    assert decode(text) == message
    with pytest.raises(ProtocolError, match="words"):
        decode('{"type":"words","turn":0,"index":0,"words":[{"word":"a"}]}')
