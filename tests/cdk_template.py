"""Helpers for the CDK app's tests (imported as ``cdk_template``): synthesize it as ``cdk synth`` does, and
read IAM statements out of a template."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[1]
CDK_DIR = ROOT / "deploy" / "cdk"
_SYNTH_TIMEOUT_S = 300


def synth(outdir: Path, context: dict[str, str]) -> Path:
    """``python app.py`` with ``CDK_OUTDIR`` and ``CDK_CONTEXT_JSON`` set, exactly what ``cdk synth`` runs."""
    env = {
        **os.environ,
        "CDK_OUTDIR": str(outdir),
        "CDK_CONTEXT_JSON": json.dumps(context),
        "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
    }
    subprocess.run(
        [sys.executable, "app.py"],
        cwd=CDK_DIR,
        env=env,
        check=True,
        timeout=_SYNTH_TIMEOUT_S,
        capture_output=True,
    )
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
