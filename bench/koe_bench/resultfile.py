"""A scenario run as a script (``python -m koe_bench.<scenario> [--json PATH]``): its result printed as
JSON, and the same text written to ``PATH`` where one is given."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def emit(report: Mapping[str, Any], path: Path | None) -> None:
    """Print ``report`` as indented JSON and, given a ``path``, write it there with a final newline."""
    text = json.dumps(report, indent=2)
    if path is not None:
        path.write_text(text + "\n")
    print(text)
