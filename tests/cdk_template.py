"""Helpers for the CDK app's tests (imported as ``cdk_template``): synthesize it as ``cdk synth`` does, and
read IAM statements out of a template."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[1]
CDK_DIR = ROOT / "deploy" / "cdk"
_SYNTH_TIMEOUT_S = 300
_NODE_TIMEOUT_S = 30


def jsii_env() -> dict[str, str]:
    """What keeps jsii from printing its end-of-life banner for the Node that runs it (the ``node`` on the
    PATH): the variable must name that Node's major version. Its Python side would relay the banner as bytes
    reprs, one per line, into the synth's output (the Makefile's ``JSII_NODE_ENV`` does the same)."""
    node = shutil.which("node")
    if node is None:  # jsii cannot run at all: the CDK tests fail on that, not on a banner
        return {}
    major = subprocess.run(
        [node, "-p", "process.versions.node.split('.')[0]"],
        capture_output=True,
        text=True,
        check=True,
        timeout=_NODE_TIMEOUT_S,
    ).stdout.strip()
    return {"JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": major}


def synth(outdir: Path, context: dict[str, str]) -> Path:
    """``python app.py`` with ``CDK_OUTDIR`` and ``CDK_CONTEXT_JSON`` set, exactly what ``cdk synth`` runs.

    Raises:
        AssertionError: the app failed (the message holds its stderr), or its stderr holds lines jsii relayed
            as bytes reprs (a banner of Node's that :func:`jsii_env` did not silence).
    """
    env = {**os.environ, **jsii_env(), "CDK_OUTDIR": str(outdir), "CDK_CONTEXT_JSON": json.dumps(context)}
    done = subprocess.run(
        [sys.executable, "app.py"],
        cwd=CDK_DIR,
        env=env,
        check=False,
        timeout=_SYNTH_TIMEOUT_S,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"python app.py exited with {done.returncode}:\n{done.stderr}"
    relayed = [line for line in done.stderr.splitlines() if line.startswith(("b'", 'b"'))]
    assert not relayed, "jsii relayed Node's output as bytes reprs:\n" + "\n".join(relayed)
    return outdir


def load(outdir: Path, name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((outdir / name).read_text(encoding="utf-8"))
    return loaded


def resources(template_json: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template_json["Resources"].items() if v["Type"] == kind}


def statements(template_json: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every IAM statement in the template, with the logical id of the policy that holds it."""
    found = []
    for kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
        for logical_id, policy in resources(template_json, kind).items():
            found += [(logical_id, s) for s in policy["Properties"]["PolicyDocument"]["Statement"]]
    for logical_id, role in resources(template_json, "AWS::IAM::Role").items():
        for inline in role["Properties"].get("Policies", []):
            found += [(logical_id, s) for s in inline["PolicyDocument"]["Statement"]]
    return found


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]
