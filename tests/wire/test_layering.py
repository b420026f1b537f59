"""The protocol sits below the product: koe's clients and the wire load without the pipeline, the server,
the engine or numpy, so a client application pays for none of them."""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import koe
import koe.client
import koe.wire

#: What the client and the wire must never load: the product's heavy layers and the numeric stack.
FORBIDDEN = ("koe.pipeline", "koe.server", "koe.engine", "koe.text", "koe.g2p", "koe.scheduler", "numpy")


def _forbidden(module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in FORBIDDEN)


#: The koe modules a client may import besides the wire: the exception hierarchy and the install hints,
#: both standard-library-only leaves.
CLIENT_MAY_IMPORT = ("koe.wire", "koe.client", "koe.errors", "koe.extras")


def _modules(package: object) -> list[str]:
    path = package.__path__  # type: ignore[attr-defined]
    return [f"{package.__name__}.{info.name}" for info in pkgutil.walk_packages(path)]  # type: ignore[attr-defined]


def test_every_client_and_wire_module_loads_without_the_pipeline_server_engine_or_numpy() -> None:
    modules = _modules(koe.client) + _modules(koe.wire)
    probe = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True).stdout)
    assert [module for module in loaded if _forbidden(module)] == []


def _client_may_import(name: str) -> bool:
    top = name.split(".")[0]
    return name.startswith(CLIENT_MAY_IMPORT) or (top != "koe" and top in sys.stdlib_module_names)


def test_client_modules_import_only_the_wire_and_the_standard_library_at_load_time() -> None:
    outside: list[str] = []
    for path in Path(koe.client.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:  # module level only: optional extras are imported where they are used
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )
            for name in names:
                top = name.split(".")[0]
                allowed = name.startswith(CLIENT_MAY_IMPORT) or (
                    top != "koe" and top in sys.stdlib_module_names
                )
                if not allowed and name != "__future__":
                    outside.append(f"{path.name}: {name}")
    assert outside == []


def _is_type_checking_block(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def _imported_names(statements: list[ast.stmt], package: str) -> Iterator[tuple[str, str | None]]:
    """(module, name imported from it) for every import in ``statements``, nested ones included: a lazy
    import still makes one module depend on the other. Type-only imports (``if TYPE_CHECKING:``) are left
    out: nothing loads them."""
    for statement in statements:
        if _is_type_checking_block(statement):
            yield from _imported_names(statement.orelse, package)
            continue
        for node in ast.walk(statement):
            if isinstance(node, ast.Import):
                yield from ((alias.name, None) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parents = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parents, base] if base else parents)
                yield from ((base, alias.name) for alias in node.names)


def import_graph(source: Path, top: str) -> dict[str, set[str]]:
    """Which of package ``top``'s modules (its folder is ``source``) each of its modules imports."""
    files: dict[str, tuple[Path, str]] = {}
    for path in source.rglob("*.py"):
        parts = [top, *path.relative_to(source).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
            files[".".join(parts)] = (path, ".".join(parts))
        else:
            files[".".join(parts)] = (path, ".".join(parts[:-1]))

    def module_of(base: str, name: str | None) -> str | None:
        candidate = f"{base}.{name}" if name is not None and f"{base}.{name}" in files else base
        while candidate and candidate not in files:  # ``import koe.a.b`` of a name inside ``koe.a``
            candidate = candidate.rpartition(".")[0]
        return candidate or None

    graph: dict[str, set[str]] = {}
    for module, (path, package) in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets = {module_of(base, name) for base, name in _imported_names(tree.body, package)}
        graph[module] = {target for target in targets if target is not None and target != module}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph`` as the modules along it (first == last), or ``[]`` when it has none."""
    finished: set[str] = set()
    for start in sorted(graph):
        if start in finished:
            continue
        path = [start]
        branches = [iter(sorted(graph[start]))]
        while branches:
            following = next(branches[-1], None)
            if following is None:
                finished.add(path.pop())
                branches.pop()
            elif following in path:
                return [*path[path.index(following) :], following]
            elif following not in finished:
                path.append(following)
                branches.append(iter(sorted(graph[following])))
    return []


def test_the_koe_package_has_no_import_cycle() -> None:
    source = Path(koe.__file__).parent
    assert find_cycle(import_graph(source, "koe")) == []


def test_a_cycle_through_a_lazy_import_is_found(tmp_path: Path) -> None:
    """The control: the check above can fail, and a cycle hidden in a function body counts."""
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "session.py").write_text("def connect():\n    from .transport import open\n")
    (tmp_path / "transport.py").write_text("from pkg.session import connect\n")
    (tmp_path / "types.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.transport import open\n"
    )
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.types"] == set()  # a type-only import loads nothing
    assert find_cycle(graph) == ["pkg.session", "pkg.transport", "pkg.session"]


#: The benchmark package (bench/): it imports koe, never the other way round.
BENCH = "koe_bench"


def bench_imports(source: Path) -> list[str]:
    """``file:line`` of every import of :data:`BENCH` under ``source``, lazy and type-only ones included."""
    found = []
    for path in sorted(source.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )
            if any(name == BENCH or name.startswith(BENCH + ".") for name in names):
                found.append(f"{path.relative_to(source)}:{node.lineno}")
    return found


def test_koe_never_imports_the_benchmark_package() -> None:
    """``koe bench`` and ``koe soak`` reach koe_bench through an entry point (koe.cli), not an import."""
    assert bench_imports(Path(koe.__file__).parent) == []


def test_an_import_of_the_benchmark_package_is_found_however_it_hides(tmp_path: Path) -> None:
    """The control: a lazy import and a type-only one both count."""
    (tmp_path / "cli.py").write_text("def bench():\n    from koe_bench.run import run\n")
    (tmp_path / "types.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import koe_bench\n"
    )
    (tmp_path / "other.py").write_text("import koe_benchmarks\nfrom .koe_bench import x\n")
    assert bench_imports(tmp_path) == ["cli.py:2", "types.py:3"]


def test_the_benchmark_package_has_no_import_cycle() -> None:
    import koe_bench

    assert find_cycle(import_graph(Path(koe_bench.__file__).parent, BENCH)) == []
