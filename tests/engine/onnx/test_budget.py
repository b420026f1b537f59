"""The frame budget of whole decodes: a decode that would take the frames in progress past it waits for
them to end; one that fits, or finds none in progress, starts at once; a cancelled wait holds nothing."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from koe.engine.onnx.budget import FrameBudget

#: How long a decode that must wait is watched for entering anyway (a negative: only a timeout shows it).
_WATCHED_S = 0.3
_JOINED_S = 5.0


@contextmanager
def _holding_in_thread(
    budget: FrameBudget, frames: int, cancel: threading.Event | None = None
) -> Iterator[tuple[threading.Event, threading.Event, list[bool]]]:
    """A thread that holds ``frames`` until released: (entered, release, what it was granted)."""
    entered, release, granted = threading.Event(), threading.Event(), []

    def hold() -> None:
        with budget.holding(frames, cancel) as held:
            granted.append(held)
            entered.set()
            release.wait()

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        yield entered, release, granted
    finally:
        release.set()
        thread.join(_JOINED_S)


def test_a_decode_past_the_budget_waits_for_the_one_in_progress_to_end() -> None:
    budget = FrameBudget(400)
    with _holding_in_thread(budget, 300) as (first, release_first, _):
        assert first.wait(_JOINED_S)
        with _holding_in_thread(budget, 200) as (second, _, granted):
            assert not second.wait(_WATCHED_S)
            assert budget.held == 300
            release_first.set()
            assert second.wait(_JOINED_S)
            assert granted == [True]
            assert budget.held == 200
    assert budget.held == 0


def test_decodes_that_fit_together_run_together() -> None:
    budget = FrameBudget(400)
    with _holding_in_thread(budget, 150) as (first, _, _), _holding_in_thread(budget, 250) as (second, _, _):
        assert first.wait(_JOINED_S) and second.wait(_JOINED_S)
        assert budget.held == 400


def test_a_decode_longer_than_the_budget_runs_alone() -> None:
    budget = FrameBudget(400)
    with budget.holding(900) as held:
        assert held and budget.held == 900
    assert budget.held == 0


def test_a_cancelled_wait_holds_nothing() -> None:
    budget = FrameBudget(400)
    cancel = threading.Event()
    with _holding_in_thread(budget, 300) as (first, _, _):
        assert first.wait(_JOINED_S)
        with _holding_in_thread(budget, 200, cancel) as (second, _, granted):
            cancel.set()
            assert second.wait(_JOINED_S)
            assert granted == [False]
            assert budget.held == 300


def test_a_budget_of_no_frames_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1 frame"):
        FrameBudget(0)
