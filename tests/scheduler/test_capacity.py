"""Admission by the machine's speed: pure arithmetic on a scripted CPU clock, no server, no sleeping."""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from koe.errors import OverloadedError
from koe.scheduler.capacity import OVER_CAPACITY, WINDOW_AUDIO_S, AudioPerCpu, Capacity

RETRY_S = 2.5
#: A streamed answer's typical segment.
SEGMENT_S = 4.0


class Machine:
    """A scripted process: its CPU seconds, advanced by hand as audio is made."""

    def __init__(self) -> None:
        self.cpu_s = 0.0


def capacity(
    machine: Machine, *, cores: float = 2, share: float = 0.6, value: float | None = None
) -> Capacity:
    meter = AudioPerCpu(lambda: machine.cpu_s, value)
    return Capacity(cores, share, lambda: RETRY_S, meter)


def make(account: Capacity, machine: Machine, audio_s: float, per_cpu_s: float) -> None:
    """``audio_s`` of audio made in segments of :data:`SEGMENT_S` at ``per_cpu_s`` audio-s per CPU-s."""
    for _ in range(round(audio_s / SEGMENT_S)):
        machine.cpu_s += SEGMENT_S / per_cpu_s
        account.made(SEGMENT_S)


def admitted(account: Capacity, seats: int, held: ExitStack) -> int:
    """How many of ``seats`` new seats start speaking (each held inside ``held``) before one is refused."""
    for count in range(seats):
        try:
            held.enter_context(account.seat().speaking())
        except OverloadedError:
            return count
    return seats


def test_listeners_are_admitted_up_to_the_share_of_what_the_cores_make_and_the_next_is_refused() -> None:
    account = capacity(Machine(), cores=2, value=2.0)  # 4 audio-s/s; 0.6 of it carries 2 listeners
    assert account.supply() == pytest.approx(4.0)
    with ExitStack() as held:
        assert admitted(account, 2, held) == 2
        with pytest.raises(OverloadedError) as refused:
            account.check()
    assert (refused.value.code, refused.value.retry_after_s) == (OVER_CAPACITY, RETRY_S)
    assert "makes 4.00 s of audio per second: one more would need 3.00" in refused.value.message
    assert (account.speaking, account.refused) == (0, 1)


def test_the_figure_is_the_audio_made_per_cpu_second_over_windows_of_audio() -> None:
    machine = Machine()
    account = capacity(machine, cores=2)
    machine.cpu_s = 30.0  # loading and warming the model: charged to no audio
    make(account, machine, SEGMENT_S, per_cpu_s=2.0)  # the first segment opens the first window
    assert account.supply() is None
    make(account, machine, WINDOW_AUDIO_S - SEGMENT_S, per_cpu_s=2.0)
    assert account.supply() is None  # a window not yet full: no figure yet
    make(account, machine, SEGMENT_S, per_cpu_s=2.0)
    assert account.supply() == pytest.approx(4.0)
    make(account, machine, 8 * WINDOW_AUDIO_S, per_cpu_s=1.0)  # slower: each window believed in part
    assert account.supply() == pytest.approx(2.0, rel=0.01)


def test_a_seat_that_spoke_is_not_checked_again_but_counts_while_it_speaks() -> None:
    account = capacity(Machine(), cores=1, value=3.5)  # 0.6 of 3.5 carries 2 listeners
    first, second = account.seat(), account.seat()
    with first.speaking(), second.speaking():
        pass
    with ExitStack() as held:
        held.enter_context(first.speaking())
        held.enter_context(second.speaking())
        with pytest.raises(OverloadedError), account.seat().speaking():
            pass
        with second.speaking():  # its next turn, queued behind the one speaking: never refused
            assert account.speaking == 3


def test_when_a_listener_finishes_the_next_is_admitted() -> None:
    account = capacity(Machine(), cores=1, value=3.5)
    with ExitStack() as held:
        assert admitted(account, 3, held) == 2
        assert account.speaking == 2  # the refused newcomer's seat is not counted
    with ExitStack() as first:
        assert admitted(account, 1, first) == 1
        with account.seat().speaking():
            assert account.speaking == 2
    assert account.speaking == 0


def test_a_share_of_zero_admits_everything() -> None:
    account = capacity(Machine(), share=0.0, value=0.1)
    with ExitStack() as held:
        assert admitted(account, 10, held) == 10


def test_nothing_is_refused_while_the_meter_holds_no_figure() -> None:
    machine = Machine()
    account = capacity(machine, cores=1)
    with ExitStack() as held:
        assert admitted(account, 10, held) == 10
    make(account, machine, SEGMENT_S + WINDOW_AUDIO_S, per_cpu_s=0.05)  # 20× slower than real time
    with ExitStack() as held:
        assert admitted(account, 10, held) == 1


def test_the_first_listener_is_admitted_however_slow_the_machine() -> None:
    account = capacity(Machine(), value=0.1)
    with ExitStack() as held:
        assert admitted(account, 2, held) == 1


def test_fewer_cores_admit_fewer_listeners() -> None:
    with ExitStack() as held:
        assert admitted(capacity(Machine(), cores=4, value=2.0), 10, held) == 4
        assert admitted(capacity(Machine(), cores=1, value=2.0), 10, held) == 1


def test_a_share_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError, match="0 <= share <= 1"):
        capacity(Machine(), share=1.5)
