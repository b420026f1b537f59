"""The segmentation policy case by case: text → expected segments, fed whole and character by character."""

from __future__ import annotations

import pytest

from koe.errors import ConfigError
from koe.text.boundary import ends_at_pause
from koe.text.segment import MAX_SEGMENT_CHARS, Segment, Segmenter, SegmenterOptions


def run(
    pieces: list[str], options: SegmenterOptions | None = None, limit: int | None = None
) -> list[Segment]:
    seg = Segmenter(options)
    seg.set_next_limit(limit)
    out = [s for piece in pieces for s in seg.feed(piece)]
    return out + seg.flush()


def texts(text: str, options: SegmenterOptions | None = None, limit: int | None = None) -> list[str]:
    """Segment texts; also checks that feeding one character at a time gives the very same segments."""
    whole = run([text], options, limit)
    assert run(list(text), options, limit) == whole
    for s in whole:
        assert text[s.source_span[0] : s.source_span[1]] == s.text
    return [s.text for s in whole]


CASES = {
    "first segment ends at a clause once it has 3 words": (
        "Sure, I can help with that, it is easy. It takes a minute.",
        ["Sure, I can help with that,", "it is easy. It takes a minute."],
    ),
    "a 1-2 word clause is never a segment of its own": (
        "Sure, fine. Then we go home together.",
        ["Sure, fine.", "Then we go home together."],
    ),
    "later segments end at sentences, not clauses": (
        "Okay then. We mix the flour, then the eggs, then the milk. Then we bake it for an hour.",
        ["Okay then.", "We mix the flour, then the eggs, then the milk.", "Then we bake it for an hour."],
    ),
    "very short sentences merge with the next": (
        "Hello there my friend. Yes. No. This is a longer sentence that goes on.",
        ["Hello there my friend.", "Yes. No. This is a longer sentence that goes on."],
    ),
    "a short sentence is not merged past the target": (
        "Hello there my friend. Ok. " + "word " * 25 + "end.",
        ["Hello there my friend.", "Ok.", "word " * 25 + "end."],
    ),
    "a short sentence is not merged past the target up to a line break": (
        "Hello there my friend. Ok. " + "word " * 25 + "end\nNext.",
        ["Hello there my friend.", "Ok.", "word " * 25 + "end", "Next."],
    ),
    "a question about a path ends at its mark": (
        "Is it in /usr/bin? Yes it is, I think.",
        ["Is it in /usr/bin?", "Yes it is, I think."],
    ),
    "a backtick opening a line is inline code": ("`x` is a name. Ok.", ["`x` is a name.", "Ok."]),
    "titles and e.g./i.e. never end a sentence": (
        "Dr. Smith met Mr. Jones, e.g. at noon. Then i.e. later they left.",
        ["Dr. Smith met Mr. Jones,", "e.g. at noon. Then i.e. later they left."],
    ),
    "etc. ends a sentence only before a capital": (
        "Hi there friend. We had apples, pears, etc. and more. We had plums, figs, etc. Then we left.",
        [
            "Hi there friend.",
            "We had apples, pears, etc. and more.",
            "We had plums, figs, etc.",
            "Then we left.",
        ],
    ),
    "acronyms with dots": (
        "The U.S. economy grew. The U.S. Then it shrank.",
        ["The U.S. economy grew.", "The U.S. Then it shrank."],
    ),
    "initials are not sentence ends": (
        "Books by J. R. R. Tolkien are long. Very long.",
        ["Books by J. R. R. Tolkien are long.", "Very long."],
    ),
    "decimals and versions": (
        "Pi is 3.14 today. Version v2.0.1 shipped in 2023. It was fine.",
        ["Pi is 3.14 today.", "Version v2.0.1 shipped in 2023.", "It was fine."],
    ),
    "times and thousands are not clause ends": (
        "At 9:30 we had 1,000 guests and tea. Nice.",
        ["At 9:30 we had 1,000 guests and tea.", "Nice."],
    ),
    "an ellipsis before a lower-case word is a pause": (
        "I think... maybe not. Wait... What?",
        ["I think... maybe not.", "Wait... What?"],
    ),
    "!? runs end at the first mark": (
        "Really?! That is great news! Yes.",
        ["Really?", "That is great news! Yes."],
    ),
    "closing quotes and brackets stay with their sentence": (
        'He said "stop." Then he left (very quietly.) And so on.',
        ['He said "stop."', "Then he left (very quietly.)", "And so on."],
    ),
    "a closing quote after a comma is a clause end": (
        '"Fine," she said, "we go." Fine.',
        ['"Fine," she said,', '"we go." Fine.'],
    ),
    "URLs and emails are not cut": (
        "See https://example.com/a?b=1&c=2. Or mail bob@example.com today. Thanks!",
        ["See https://example.com/a?b=1&c=2.", "Or mail bob@example.com today.", "Thanks!"],
    ),
    "a question inside a URL is not an end": (
        "Open https://x.org/search?q=1 now. Done.",
        ["Open https://x.org/search?q=1 now.", "Done."],
    ),
    "each list item is a segment": (
        "Steps:\n1. Mix the flour.\n2) Add water.\n- Stir well\n* Bake it\n  + Serve",
        ["Steps:", "1. Mix the flour.", "2) Add water.", "- Stir well", "* Bake it", "+ Serve"],
    ),
    "headings are segments": ("## Setup\nInstall it first.", ["## Setup", "Install it first."]),
    "paragraph breaks end segments": (
        "First line here\n\nSecond paragraph here.",
        ["First line here", "Second paragraph here."],
    ),
    "code blocks are skipped": (
        "Run this:\n```python\nprint('hi. there')\nx = [1, 2]\n```\nThat prints hi.",
        ["Run this:", "That prints hi."],
    ),
    "tilde fences are code blocks too": ("Look:\n~~~\na. b\n~~~\nOk.", ["Look:", "Ok."]),
    "an unclosed code block runs to the end": ("Code:\n```\nx = 1. y = 2", ["Code:"]),
    "a code block at the very start": ("```\nx = 1\n```\nAfter it.", ["After it."]),
    "backticks inside a line are inline code": ("Use ``` here, like so.", ["Use ``` here, like so."]),
    "CJK sentence and clause marks": (
        "你好。我很好！谢谢你的帮助、朋友。",
        ["你好。", "我很好！谢谢你的帮助、朋友。"],
    ),
    "full-width marks in a first clause": ("はい、わかりました。", ["はい、わかりました。"]),
    "CJK closing quotes after a mark start the next segment and are skipped": (
        "「你好。」他说了很多话。",
        ["「你好。", "他说了很多话。"],
    ),
    "dashes are clause ends": (
        "We went there — it was closed — and came home. Done.",
        ["We went there —", "it was closed — and came home.", "Done."],
    ),
    "hyphens and ranges are not": (
        "A well-known 3-5 day trip -- fun. Ok.",
        ["A well-known 3-5 day trip --", "fun. Ok."],
    ),
    "unspeakable pieces are not segments": ("---\n| --- | --- |\nReal text.\n👋", ["Real text."]),
    "an exclamation starting a word is not an end": (
        "See ![the chart](c.png) and a != b here. Ok.",
        ["See ![the chart](c.png) and a != b here.", "Ok."],
    ),
}


@pytest.mark.parametrize(("text", "expected"), CASES.values(), ids=CASES.keys())
def test_segments(text: str, expected: list[str]) -> None:
    assert texts(text) == expected


LIMIT_CASES = {
    "a long sentence is cut at its last clause within the limit": (
        "Hi there. One two three, four five six, seven eight nine ten eleven twelve.",
        40,
        ["Hi there.", "One two three, four five six,", "seven eight nine ten eleven twelve."],
    ),
    "without a clause it is cut at a word boundary": (
        "Hi there. one two three four five six seven eight nine ten eleven twelve thirteen fourteen.",
        20,
        [
            "Hi there.",
            "one two three four",
            "five six seven eight",
            "nine ten eleven",
            "twelve thirteen fourteen.",
        ],
    ),
    "a sentence ending just past the limit is not cut before its last words": (
        "Temperatures range from -5 to 10 degrees. Then it warms up.",
        40,
        ["Temperatures range from -5 to 10 degrees.", "Then it warms up."],
    ),
    "a tiny limit still leaves three words": (
        "Hi there. alpha beta gamma delta epsilon.",
        1,
        ["Hi there.", "alpha beta gamma", "delta epsilon."],
    ),
    "short clauses past a tiny limit do not count as three words": (
        "Hi there. ab, cd, ef gh ij kl.",
        1,
        ["Hi there.", "ab, cd, ef", "gh ij kl."],
    ),
    "a sentence that fits is still cut at its end": (
        "Hi there. Short one here. Another short one.",
        30,
        ["Hi there.", "Short one here.", "Another short one."],
    ),
}


@pytest.mark.parametrize(("text", "limit", "expected"), LIMIT_CASES.values(), ids=LIMIT_CASES.keys())
def test_segments_with_limit(text: str, limit: int, expected: list[str]) -> None:
    assert texts(text, limit=limit) == expected


def test_max_chars_cuts_long_sentences_at_clauses() -> None:
    clause = "and then the story goes on for a while, "
    text = "Start here. " + clause * 12 + "end."
    out = texts(text, SegmenterOptions(max_chars=150, target_chars=100))
    assert all(len(t) <= 150 for t in out)
    assert all(t.endswith((",", ".")) for t in out)
    assert " ".join(out) == text


def test_a_word_longer_than_max_chars_is_cut_at_max_chars() -> None:
    blob = "x" * 130
    out = texts(f"Hi. {blob} tail", SegmenterOptions(max_chars=100, target_chars=50, merge_below_chars=10))
    assert out == ["Hi.", "x" * 100, "x" * 30 + " tail"]


def test_a_long_line_without_enough_words_is_one_segment() -> None:
    text = "Hi there. Supercalifragilistic expialidocious\nNext line."
    assert texts(text, limit=10) == ["Hi there.", "Supercalifragilistic expialidocious", "Next line."]


def test_the_limit_can_grow_between_segments() -> None:
    seg = Segmenter()
    seg.set_next_limit(20)
    first = seg.feed("Okay. One two three four five six seven eight nine. ")
    seg.set_next_limit(None)
    rest = seg.feed("Ten eleven twelve thirteen fourteen fifteen sixteen. ") + seg.flush()
    assert [s.text for s in first + rest] == [
        "Okay.",
        "One two three four",
        "five six seven eight nine.",  # not "five six seven eight" and a stranded "nine."
        "Ten eleven twelve thirteen fourteen fifteen sixteen.",
    ]


EMIT_AT = {
    "a period and a space in one token": (["Hello world.", " Next", " one."], 1),
    "a period then a newline": (["Hello world.\n", "Next"], 0),
    "an exclamation mark needs nothing after it": (["Great, thanks", "!"], 1),
    "a question mark": (["Is it ready", "?"], 1),
    "a CJK full stop": (["你好", "。"], 1),
    "a clause end with its space": (["Sure, I can help", " with that, of", " course"], 1),
    "Dr. waits for the next word": (["Ask Dr.", " Smith", " now.", " Then"], 3),
    "3. waits for the next character": (["It was 3.", "14 today.", " Then"], 2),
    "etc. waits for the next word": (["Apples, pears, etc.", " ", "Then more."], 2),
}


@pytest.mark.parametrize(("pieces", "at"), EMIT_AT.values(), ids=EMIT_AT.keys())
def test_first_segment_is_emitted_as_soon_as_certain(pieces: list[str], at: int) -> None:
    seg = Segmenter()
    emitted = [i for i, piece in enumerate(pieces) if seg.feed(piece)]
    assert emitted[:1] == [at]


def test_flush_emits_the_rest_and_is_idempotent() -> None:
    seg = Segmenter()
    assert seg.feed("It was 3.") == []
    assert [s.text for s in seg.flush()] == ["It was 3."]
    assert seg.flush() == []


def test_reset_starts_a_new_turn() -> None:
    seg = Segmenter()
    seg.set_next_limit(5)
    seg.feed("First turn, with words. And more")
    seg.flush()
    seg.reset()
    out = seg.feed("Second turn is here, with no limit. ") + seg.flush()
    assert [(s.text, s.source_span, s.index, s.is_first) for s in out] == [
        ("Second turn is here,", (0, 20), 0, True),
        ("with no limit.", (21, 35), 1, False),
    ]


def test_indexes_count_emitted_segments_only() -> None:
    out = run(["---\nFirst one.\n---\nSecond one here ok."])
    assert [(s.index, s.is_first, s.text) for s in out] == [
        (0, True, "First one."),
        (1, False, "Second one here ok."),
    ]


def test_spoken_text_and_alignment_point_into_the_turn() -> None:
    text = "Hi there. Add **water** at 9:30 now."
    out = run([text])
    second = out[1]
    assert second.spoken_text == "Add water at 9 30 now."
    start = second.spoken_text.index("water")
    a, b = second.alignment.source_span(start, start + len("water"))
    assert text[a:b] == "water"
    a, b = second.alignment.source_span(second.spoken_text.index("9 30"), second.spoken_text.index(" now"))
    assert text[a:b] == "9:30"


def test_feed_after_flush_needs_reset() -> None:
    seg = Segmenter()
    seg.flush()
    with pytest.raises(ConfigError, match="reset"):
        seg.feed("more")


@pytest.mark.parametrize("limit", [0, -5])
def test_a_limit_below_one_is_refused(limit: int) -> None:
    with pytest.raises(ConfigError, match="limit >= 1"):
        Segmenter().set_next_limit(limit)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"first_min_words": 0},
        {"merge_below_chars": 0},
        {"merge_below_chars": 150, "target_chars": 100},
        {"target_chars": 400},
        {"max_chars": MAX_SEGMENT_CHARS + 1},
    ],
)
def test_inconsistent_options_are_refused(kwargs: dict[str, int]) -> None:
    with pytest.raises(ConfigError, match="expected"):
        SegmenterOptions(**kwargs)


def test_two_segments_joined_speak_as_one_and_each_word_still_maps_to_its_source() -> None:
    text = "Hi there. How are you today?"
    segmenter = Segmenter()
    first, second = [*segmenter.feed(text), *segmenter.flush()]
    joined = first.joined(second)
    assert joined.spoken_text == f"{first.spoken_text} {second.spoken_text}"
    assert (joined.source_span, joined.index, joined.is_first) == ((0, len(text)), 0, True)
    head, tail = len(first.spoken_text), len(second.spoken_text)
    assert joined.alignment.source_span(0, head) == first.alignment.source_span(0, head)
    assert joined.alignment.source_span(head + 1, head + 1 + tail) == second.alignment.source_span(0, tail)
    assert text[slice(*joined.alignment.source_span(head + 1, head + 4))] == "How"


@pytest.mark.parametrize(
    ("text", "pause"),
    [
        ("Take the Red Line north to Central Station,", True),
        ("It ships today. ", True),
        ('She said "yes."', True),
        ("他说，", True),
        ("wait —", True),
        ("Please call Stella and ask her to bring", False),
        ("", False),
    ],
)
def test_a_text_ends_at_a_pause_only_at_a_sentence_or_clause_mark(text: str, pause: bool) -> None:
    assert ends_at_pause(text) is pause
