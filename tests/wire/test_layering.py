"""The protocol sits below the product: koe's clients and the wire load without the pipeline, the server,
the engine or numpy, so a client application pays for none of them."""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

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
