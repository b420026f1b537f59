"""How to install one of koe's optional extras, or the benchmark package, worded once for every message
that asks for one.

koe is installed from its checkout (no package index carries a project of that name), so the hint is the
Makefile's ``make extra EXTRA=<name>``: it installs the extra into the checkout's ``.venv`` with the pins of
``requirements.lock``, and compiles what must be compiled the way ``make test`` does. A hint naming a
package index would fail, or install whatever someone registers under the name later.
"""

from __future__ import annotations

from typing import Literal

#: The extras a message may ask for; each is a key of ``[project.optional-dependencies]`` in
#: pyproject.toml (tests/test_extras.py checks both that and the make target).
Extra = Literal["bedrock", "gpu", "hf", "local-llm", "openai", "sagemaker", "zeroconf"]


#: How to install the benchmark package (``bench/``, the distribution koe-bench) into the checkout's ``.venv``
#: with the pins of ``requirements.lock`` (tests/test_extras.py runs the target dry).
BENCH_INSTALL_HINT = "make bench-install (in koe's checkout)"


def install_hint(extra: Extra) -> str:
    """The command that installs ``extra``, as a message should quote it."""
    return f"make extra EXTRA={extra} (in koe's checkout)"
