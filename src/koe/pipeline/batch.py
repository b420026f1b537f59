"""Whole segments of any sessions in one engine call: the batch group the scheduler coalesces them into.

Each segment is prepared (G2P) on its own; a call then sends every boarded segment's requests to
``engine.synthesize_batch`` at once and hands each segment its own part — audio, word timings — back. A
segment whose caller has gone is skipped by the engine (``is_cancelled``). If the shared call fails, each
segment is retried alone, so the one that cannot be synthesized gets its own error and the others their
audio. Used only where the engine shares passes (``capabilities.max_batch > 1``) and segments decode whole;
the ONNX engine keeps its one-segment jobs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from koe.engine.base import Engine, SynthesisRequest, Utterance
from koe.pipeline.job import Part, SegmentJob
from koe.scheduler.batch import BatchGroup, Cancelled

logger = logging.getLogger(__name__)


def segment_batches(engine: Engine, max_segments: int) -> BatchGroup[SegmentJob, Part]:
    """The batch group of ``engine``: calls of up to ``max_segments`` segments (and the engine's own
    ``max_batch`` requests per pass, however many pieces the segments have)."""

    def run(jobs: Sequence[SegmentJob], cancelled: Cancelled) -> list[Part | BaseException]:
        return _call(engine, jobs, cancelled)

    return BatchGroup(run, max_segments, prepare=SegmentJob.prepare)


def _call(engine: Engine, jobs: Sequence[SegmentJob], cancelled: Cancelled) -> list[Part | BaseException]:
    started = time.perf_counter()
    requests: list[SynthesisRequest] = []
    owners: list[int] = []
    for index, job in enumerate(jobs):
        requests += job.requests
        owners += [index] * len(job.requests)
    try:
        utterances = engine.synthesize_batch(requests, lambda k: cancelled(owners[k]))
    except Exception:  # the shared pass failed: find the culprit by running each segment alone
        logger.warning("a call of %d segments failed; retrying each alone", len(jobs), exc_info=True)
        return [_alone(engine, job) for job in jobs]
    call_s = time.perf_counter() - started
    answers: list[list[Utterance]] = [[] for _ in jobs]
    for owner, utterance in zip(owners, utterances, strict=True):
        answers[owner].append(utterance)
    return [job.finish(answer, call_s) for job, answer in zip(jobs, answers, strict=True)]


def _alone(engine: Engine, job: SegmentJob) -> Part | BaseException:
    started = time.perf_counter()
    try:
        utterances = engine.synthesize_batch(job.requests)
    except Exception as exc:  # this segment's own error, reported to its own session
        return exc
    return job.finish(utterances, time.perf_counter() - started)
