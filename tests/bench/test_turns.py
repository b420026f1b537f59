"""The AWS-sample baseline's sentence split, as it sees a streamed answer (no server)."""

from __future__ import annotations

from koe_bench.turns import split_sentences


def test_aws_sample_split_waits_for_the_space_after_a_sentence_end() -> None:
    assert split_sentences("Sure. Take the") == (["Sure."], "Take the")
    assert split_sentences("It is 3.5 km away.") == ([], "It is 3.5 km away.")
    assert split_sentences("Go! Now?\n\nThen") == (["Go!", "Now?"], "Then")
    assert split_sentences("") == ([], "")
