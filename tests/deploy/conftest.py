"""One synthesis of the whole CDK app (both stacks, both endpoint variants) for the template tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cdk_template import jsii_env, synth

# the tests that build stacks in this process start jsii here: its banner would land in their output too
os.environ.update(jsii_env())


@pytest.fixture(scope="session")
def cloud_assembly(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("aws_cdk", reason="deploy extra missing: pip install 'koe[deploy]'")
    return synth(tmp_path_factory.mktemp("cdk.out"), {"koe:variants": "gpu,cpu"})
