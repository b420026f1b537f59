"""The dialect registry: every dialect registered once, every message type owned by one dialect, and each
type read as a message of the dialect that owns it."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from koe.server.dialects import SPECS
from koe.server.protocol import parse_message
from koe.wire.messages import Dialect, Request

OWNED = [(spec.dialect, kind) for spec in SPECS.values() for kind in spec.messages]


def test_every_dialect_is_registered_once_under_its_own_name() -> None:
    assert list(SPECS) == list(Dialect)
    assert all(name is spec.dialect for name, spec in SPECS.items())


def test_no_message_type_is_claimed_by_two_dialects() -> None:
    assert [kind for kind, n in Counter(kind for _, kind in OWNED).items() if n > 1] == []


@pytest.mark.parametrize(("dialect", "kind"), OWNED, ids=[kind for _, kind in OWNED])
def test_each_message_type_is_read_as_a_message_of_its_dialect(dialect: Dialect, kind: str) -> None:
    frame = json.dumps({"type": kind, "text": "Hello."})
    assert getattr(parse_message(frame, max_bytes=1 << 16, max_chars=4096), "dialect", None) is dialect


def test_an_untyped_request_is_the_aws_samples() -> None:
    message = parse_message('{"text": "Hello."}', max_bytes=1 << 16, max_chars=4096)
    assert isinstance(message, Request)
    assert [spec.dialect for spec in SPECS.values() if spec.untyped is not None] == [Dialect.AWS]
