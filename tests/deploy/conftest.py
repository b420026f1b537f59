"""One synthesis of the whole CDK app (both stacks, both endpoint variants) for the template tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cdk_template import jsii_env, synth
from support.workers import built_once

# the tests that build stacks in this process start jsii here: its banner would land in their output too
os.environ.update(jsii_env())


@pytest.fixture(scope="session")
def cloud_assembly(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Synthesized once in the run, by whichever worker asks first (``support.workers``)."""
    pytest.importorskip("aws_cdk", reason="deploy extra missing: pip install 'koe[deploy]'")
    return built_once(tmp_path_factory, "cdk.out", lambda out: synth(out, {"koe:variants": "gpu,cpu"}))
