"""A body's media type: JSON unless the route reads another, 415 for anything else."""

from __future__ import annotations

import pytest

from koe.errors import ConfigError
from koe.wire.body import JSON_MEDIA_TYPE, TEXT_MEDIA_TYPE, body_media_type


@pytest.mark.parametrize("content_type", [None, "application/json", "Application/JSON; charset=utf-8"])
def test_json_or_no_content_type_is_json(content_type: str | None) -> None:
    assert body_media_type(content_type) == JSON_MEDIA_TYPE


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "json"])
def test_any_other_media_type_is_unsupported_and_named(content_type: str) -> None:
    with pytest.raises(ConfigError, match="expected application/json, got") as raised:
        body_media_type(content_type)
    assert raised.value.code == "unsupported_media_type"


def test_a_route_that_reads_text_too_names_both() -> None:
    accepted = (JSON_MEDIA_TYPE, TEXT_MEDIA_TYPE)
    assert body_media_type("text/plain; charset=utf-8", accepted) == TEXT_MEDIA_TYPE
    with pytest.raises(ConfigError, match="application/json or text/plain"):
        body_media_type("application/xml", accepted)
