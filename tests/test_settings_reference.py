"""docs/operations.md's reference of the ``KOE_*`` variables is the one generated from the schema
(``koe.settings``), and names every variable the repository mentions exactly once, or says whose it is."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

from koe.cli import main
from koe.errors import ConfigError
from koe.settings import REFERENCE_END, REFERENCE_START, reference_markdown, with_reference

ROOT = Path(__file__).parents[1]
OPERATIONS = ROOT / "docs" / "operations.md"
#: Where koe and what ships or runs beside it are written; tests/ name variables of their own (the fake
#: engine's) and set koe's, which are checked where koe reads them.
SCANNED = ("src/koe", "bench", "deploy", "docs", "README.md", "Makefile")
SUFFIXES = {".py", ".js", ".html", ".md", ".sh", ".Dockerfile", ".ts", ".json", ""}
#: Names that are no setting of koe's, each with its owner: the doc says so beside the reference.
NOT_KOES = {
    "KOE_WEIGHTS": "a build argument of deploy/gpu.Dockerfile (and bench/gpu_ladder.sh passes it on)",
    "KOE_BENCH_DEVICE": "the GPU scripts' own (bench/)",
    "KOE_BENCH_LIMIT_S": "the GPU scripts' own (bench/)",
    "KOE_GPU_KIT": "the CUDA tests' and the GPU kit's own (make gpu-kit)",
    "KOE_SCREENSHOT": "the browser test's own (make screenshot)",
}
NAME = re.compile(r"\bKOE_[A-Z][A-Z0-9_]*\b")


def mentioned(path: Path) -> set[str]:
    """The ``KOE_*`` names in a file: in Python, only in its strings and comments (a constant named
    ``KOE_…`` is no variable)."""
    text = path.read_text(errors="replace")
    if path.suffix != ".py":
        return set(NAME.findall(text))
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return {name for token in tokens if token.type != tokenize.NAME for name in NAME.findall(token.string)}


def scanned_files() -> list[Path]:
    files: list[Path] = []
    for entry in (ROOT / name for name in SCANNED):
        candidates = [entry] if entry.is_file() else sorted(entry.rglob("*"))
        files += [p for p in candidates if p.is_file() and "node_modules" not in p.parts and _text(p)]
    return files


def _text(path: Path) -> bool:
    return path.suffix in SUFFIXES or path.name.endswith(".Dockerfile")


def rows(reference: str) -> list[str]:
    return re.findall(r"^\| `(KOE_[A-Z0-9_]+)` \|", reference, re.MULTILINE)


def test_the_doc_holds_the_reference_generated_from_the_schema() -> None:
    doc = OPERATIONS.read_text()
    assert with_reference(doc) == doc, (
        "stale settings reference: run `koe settings --update docs/operations.md`"
    )


def test_every_koe_variable_in_the_repository_has_exactly_one_row_and_appears_once() -> None:
    reference = reference_markdown()
    named = rows(reference)
    assert len(named) == len(set(named))
    for name in named:
        assert len(re.findall(rf"\b{name}\b", reference)) == 1, name
    found = set().union(*(mentioned(path) for path in scanned_files()))
    assert found - set(named) - set(NOT_KOES) == set()
    assert set(NOT_KOES) <= found and not set(NOT_KOES) & set(named)  # each exception still exists
    doc = OPERATIONS.read_text()
    assert all(name in doc.split(REFERENCE_END)[1] for name in NOT_KOES)  # said whose they are


def test_the_scan_finds_names_in_strings_and_comments_but_not_in_python_names(tmp_path: Path) -> None:
    """The control: a variable the code reads but the reference lacked would be found."""
    source = tmp_path / "module.py"
    source.write_text('KOE_CONSTANT = 1\nvalue = env.get("KOE_READ")  # see KOE_COMMENTED\n"""KOE_DOC"""\n')
    assert mentioned(source) == {"KOE_READ", "KOE_COMMENTED", "KOE_DOC"}
    assert "KOE_READ" not in rows(reference_markdown())


def test_koe_settings_prints_the_reference_and_updates_a_doc_between_its_marker_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["settings"]) == 0
    assert capsys.readouterr().out == reference_markdown()
    doc = tmp_path / "doc.md"
    doc.write_text(f"# Title\n\n{REFERENCE_START}\n| stale |\n{REFERENCE_END}\n\nAfter.\n")
    assert main(["settings", "--update", str(doc)]) == 0
    expected = f"# Title\n\n{REFERENCE_START}\n\n{reference_markdown()}\n{REFERENCE_END}\n\nAfter.\n"
    assert doc.read_text() == expected
    with pytest.raises(ConfigError, match="expected the lines"):
        with_reference("# no markers\n")
