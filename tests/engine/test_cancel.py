"""A Cancel is an event that also runs, once, what stops an engine run in progress."""

from __future__ import annotations

import threading

from koe.engine.base import Cancel


def test_each_stop_runs_once_when_set_from_any_thread_and_at_once_when_already_set() -> None:
    cancel = Cancel()
    stopped: list[str] = []
    cancel.on_set(lambda: stopped.append("first"))
    cancel.on_set(lambda: stopped.append("second"))
    assert stopped == [] and not cancel.is_set()
    setter = threading.Thread(target=cancel.set)
    setter.start()
    setter.join()
    cancel.set()  # again: nothing runs twice
    assert cancel.is_set() and stopped == ["first", "second"]
    cancel.on_set(lambda: stopped.append("late"))
    assert stopped == ["first", "second", "late"]
