"""Model-free pieces of the server: the session outbox, frame splitting and the error → status mapping."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koe.audio.formats import AudioFormat
from koe.errors import ConfigError, KoeError, LimitError, OverloadedError, ProtocolError, SynthesisError
from koe.server.outbox import CloseRequest, Outbox
from koe.server.turn import split_frames
from koe.wire.errors import error_body, openai_error_body, retry_after_header, route_of


def test_control_replies_overtake_queued_turn_data_which_keeps_its_order() -> None:
    async def main() -> list[object]:
        outbox = Outbox(high_water_s=10.0, low_water_s=5.0)
        outbox.data(0, "segment")
        outbox.data(0, b"audio", 0.1)
        outbox.control("cancelled")
        outbox.data(1, "flushed")
        outbox.control(CloseRequest(1000))
        return [await outbox.get() for _ in range(5)]

    assert asyncio.run(main()) == ["cancelled", CloseRequest(1000), "segment", b"audio", "flushed"]


def test_dropping_turns_removes_only_their_data_and_their_audio_seconds() -> None:
    async def main() -> None:
        outbox = Outbox(high_water_s=3.0, low_water_s=2.5)
        outbox.data(0, b"a", 1.0)
        outbox.data(1, b"b", 2.0)
        outbox.data(2, b"c", 4.0)  # 7 s queued: producers wait
        waiter = asyncio.create_task(outbox.room())
        await asyncio.sleep(0)
        assert not waiter.done()
        outbox.drop_turns({0, 2})  # 2 s left, under the low-water mark
        await asyncio.wait_for(waiter, 1.0)
        assert await outbox.get() == b"b"
        outbox.data(3, b"d", 3.5)  # over the high-water mark by itself: nothing else is counted
        blocked = asyncio.create_task(outbox.room())
        await asyncio.sleep(0)
        assert not blocked.done()
        assert await outbox.get() == b"d"
        await asyncio.wait_for(blocked, 1.0)

    asyncio.run(main())


def test_producers_wait_above_the_high_water_mark_until_under_the_low_one() -> None:
    async def main() -> None:
        outbox = Outbox(high_water_s=1.0, low_water_s=0.5)
        for _ in range(4):
            outbox.data(0, b"frame", 0.3)  # 1.2 s queued
        waiter = asyncio.create_task(outbox.room())
        await asyncio.sleep(0)
        assert not waiter.done()
        await outbox.get()  # 0.9 s: under high water, still over low water
        await asyncio.sleep(0)
        assert not waiter.done()
        await outbox.get()  # 0.6 s
        await outbox.get()  # 0.3 s: under the low-water mark
        await asyncio.wait_for(waiter, 1.0)

    asyncio.run(main())


@given(
    payload=st.binary(max_size=20_000),
    rate=st.sampled_from([8000, 16000, 24000, 48000]),
    fmt=st.sampled_from([AudioFormat.PCM, AudioFormat.MULAW, AudioFormat.ALAW]),
    frame_s=st.sampled_from([0.02, 0.05, 0.1]),
)
def test_frames_rejoin_to_the_payload_and_hold_at_most_one_frame_of_whole_samples(
    payload: bytes, rate: int, fmt: AudioFormat, frame_s: float
) -> None:
    width = 2 if fmt is AudioFormat.PCM else 1
    payload = payload[: len(payload) // width * width]
    frames = split_frames(payload, fmt, rate, frame_s)
    assert b"".join(frames) == payload
    assert all(0 < len(f) <= rate * frame_s * width and len(f) % width == 0 for f in frames)


@pytest.mark.parametrize(
    ("error", "status", "close"),
    [
        (ProtocolError("x", code="invalid_json"), 400, None),
        (ConfigError("x", code="invalid_field"), 400, None),
        (ConfigError("x", code="request_stale"), 408, None),
        (LimitError("x", code="message_too_large"), 413, 1009),
        (LimitError("x", code="turn_too_long"), 413, 1008),
        (LimitError("x", code="idle_timeout"), 408, 1008),
        (LimitError("x", code="some_new_limit"), 413, 1008),
        (OverloadedError("x"), 503, 1013),
        (OverloadedError("x", code="shutting_down"), 503, 1001),
        (SynthesisError("x"), 500, None),
        (KoeError("x"), 500, 1011),
    ],
)
def test_each_error_maps_to_one_status_and_close_code(
    error: KoeError, status: int, close: int | None
) -> None:
    route = route_of(error)
    assert (route.http_status, route.ws_close) == (status, close)


def test_overload_bodies_and_headers_carry_the_retry_hint() -> None:
    error = OverloadedError("busy", retry_after_s=2.2)
    assert error_body(error) == {"error": "queue_saturated", "message": "busy", "retry_after_s": 2.2}
    assert retry_after_header(error) == {"Retry-After": "3"}
    assert retry_after_header(ConfigError("x")) == {}
    assert openai_error_body(error)["error"] == {
        "message": "busy",
        "type": "server_error",
        "code": "queue_saturated",
        "param": None,
    }
