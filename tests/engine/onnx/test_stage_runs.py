"""The stages count the runs they begin and those in progress, from any thread: what tells a measurement of
their speed whether it ran alone (sessions stand in for ONNX Runtime's; the real ones: test_verdict.py)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, cast

import numpy as np
import onnxruntime as ort

from koe.engine.onnx.stages import Front, Stages

_WAIT_S = 5.0


class _Session:
    """Answers any run with zeros, after ``release`` is set; ``entered`` is set when a run begins."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.release.set()

    def get_inputs(self) -> list[Any]:
        return []

    def run(self, outputs: list[str], feeds: Mapping[str, Any], options: Any = None) -> list[np.ndarray]:
        self.entered.set()
        assert self.release.wait(_WAIT_S)
        return [np.zeros(600, dtype=np.float32) for _ in outputs]


class _Front:
    def window(self, start: int, end: int) -> dict[str, np.ndarray]:
        return {}


def test_a_run_in_progress_on_another_thread_and_each_run_begun_are_counted() -> None:
    frozen = _Session()
    session = cast(ort.InferenceSession, frozen)
    stages = Stages(session, session, session, "tokens", (), (), lambda: session)
    assert stages.runs() == (0, 0)
    frozen.release.clear()
    front = cast(Front, _Front())
    worker = threading.Thread(target=stages.decode_window, args=(front, np.zeros(1), (), 0, 1))
    worker.start()
    assert frozen.entered.wait(_WAIT_S)
    assert stages.runs() == (1, 1)
    frozen.release.set()
    worker.join(_WAIT_S)
    assert stages.runs() == (1, 0)
    stages.decode_window(front, np.zeros(1), (), 0, 1)
    assert stages.runs() == (2, 0)
