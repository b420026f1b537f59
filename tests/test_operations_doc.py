"""docs/operations.md states the bounds that are not settings; each figure there is the constant the code
enforces, so changing one without the other fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from starlette.applications import Starlette

from koe.g2p.chunk import G2P_CHUNK_CHARS
from koe.languages import CODES
from koe.server.connections import BYTES_PER_TURN, MAX_FRAGMENTS_PER_MESSAGE
from koe.server.serve import uvicorn_config
from koe.settings import Settings, layout_of
from koe.text.digits import DIGIT_GROUP, ENGLISH_MAX_DIGITS, MAX_NUMBER_DIGITS
from koe.text.languages.lookup import rules_for
from koe.wire.fields import MAX_REQUEST_ID_CHARS

OPERATIONS = Path(__file__).parents[1] / "docs" / "operations.md"
KIB = 1024


@pytest.fixture(scope="module")
def doc() -> str:
    return " ".join(OPERATIONS.read_text().split())  # one line: a sentence may wrap anywhere


def figure(doc: str, pattern: str) -> int:
    """The number the doc gives where ``pattern`` (a regex with one group for it) matches, once."""
    (found,) = re.findall(pattern, doc)
    return int(found.replace(",", ""))


@pytest.mark.parametrize(
    ("pattern", "constant"),
    [
        (r"at most ([\d,]+) fragments \(`MAX_FRAGMENTS_PER_MESSAGE`", MAX_FRAGMENTS_PER_MESSAGE),
        (r"more than ([\d,]+) digits in English \(`ENGLISH_MAX_DIGITS`\)", ENGLISH_MAX_DIGITS),
        (r"more than ([\d,]+) in the other languages \(`MAX_NUMBER_DIGITS`\)", MAX_NUMBER_DIGITS),
        (r"([\d,]+) digits a group \(`DIGIT_GROUP`\)", DIGIT_GROUP),
        (r"`G2P_CHUNK_CHARS` \(([\d,]+) English characters\)", G2P_CHUNK_CHARS),
        (r"at most ([\d,]+) characters \(`MAX_REQUEST_ID_CHARS`", MAX_REQUEST_ID_CHARS),
        (r"at most ([\d,]+) KiB per turn of the event loop \(`BYTES_PER_TURN`", BYTES_PER_TURN // KIB),
    ],
    ids=[
        "fragments",
        "english-number-digits",
        "number-digits",
        "digit-group",
        "g2p-chunk",
        "request-id",
        "bytes-per-turn",
    ],
)
def test_each_documented_bound_is_the_constant_the_code_enforces(
    doc: str, pattern: str, constant: int
) -> None:
    assert figure(doc, pattern) == constant


def test_the_documented_number_lengths_are_those_each_language_reads_by() -> None:
    """The doc names two constants; each language's digit reading is one of them, as the doc says."""
    for lang in CODES:
        english = lang.startswith("en")
        expected = ENGLISH_MAX_DIGITS if english else MAX_NUMBER_DIGITS
        assert rules_for(lang).digits.max_digits == expected, lang


def test_the_documented_websocket_layer_limit_and_compression_are_uvicorns_settings(doc: str) -> None:
    settings = Settings()
    config = uvicorn_config(Starlette(), settings)
    factor = figure(doc, r"more than ([\d,]+) × `max_message_bytes` \(`_TRANSPORT_SIZE_FACTOR`")
    assert config.ws_max_size == factor * settings.max_message_bytes
    assert figure(doc, r"`koe.server.serve`; ([\d,]+) KiB by default\)") * KIB == config.ws_max_size
    assert "`permessage-deflate` is never negotiated" in doc and config.ws_per_message_deflate is False


def test_the_sizing_table_is_the_rule_for_each_core_count_it_names() -> None:
    section = OPERATIONS.read_text().split("\n## Workers and threads\n")[1].split("\n## ")[0]
    rows = re.findall(r"^\| (\d+) \| \**(\d+) × (\d+)\** \|", section, re.MULTILINE)
    assert [int(cores) for cores, _, _ in rows] == [1, 2, 4, 8, 16]
    for cores, workers, threads in rows:
        layout = layout_of(None, None, int(cores))
        assert (layout.workers, layout.threads) == (int(workers), int(threads)), f"{cores} cores"
