"""The replay source: a simulation that streams a given text as token-sized pieces."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koe.agent.replay import ReplayPace, ReplaySource, tokenize
from koe.errors import ConfigError


@given(st.text())
def test_tokens_join_back_to_the_text(text: str) -> None:
    assert "".join(tokenize(text)) == text


def test_tokens_are_about_the_size_of_llm_tokens() -> None:
    assert tokenize("Hello, wonderful world.") == ["Hell", "o", ",", " wond", "erfu", "l", " worl", "d", "."]


@pytest.mark.parametrize(
    ("rate", "delay"), [(0.5, 0.0), (5000.0, 0.0), (float("nan"), 0.0), (10.0, -1.0), (10.0, 60.0)]
)
def test_a_pace_outside_its_range_is_refused(rate: float, delay: float) -> None:
    with pytest.raises(ConfigError) as caught:
        ReplayPace(rate, delay)
    assert caught.value.code == "invalid_field"


def test_the_source_streams_the_whole_text_and_says_it_is_a_simulation() -> None:
    source = ReplaySource("One. Two three.", ReplayPace(tokens_per_s=1000, first_token_delay_s=0))

    async def collect() -> list[str]:
        return [token async for token in source.stream([])]

    assert "".join(asyncio.run(collect())) == "One. Two three."
    assert source.simulated
    assert "simulation" in source.label
