"""The CDK app, synthesized offline exactly as ``cdk synth`` runs it, and its templates asserted: the
endpoint stack here, the agent's stack (AgentCore Runtime) in ``test_cdk_agent.py``.

``cdk synth`` runs ``python app.py`` with ``CDK_OUTDIR`` and ``CDK_CONTEXT_JSON`` set; the fixture does the
same once (jsii start-up costs seconds), with both variants so the optional CPU variant is covered too.
Docker image assets are staged and hashed, not built: building and deploying need Docker and an account.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aws_cdk", reason="deploy extra missing: pip install 'koe[deploy]'")
dockerfile_parse = pytest.importorskip(
    "dockerfile_parse", reason="deploy extra missing: pip install 'koe[deploy]'"
)

from aws_cdk.assertions import Match, Template  # noqa: E402 - after the skip above

from cdk_template import CDK_DIR, as_list, resources, statements  # noqa: E402

STACK = "KoeEndpoint"
INVOKE = "sagemaker:InvokeEndpointWithBidirectionalStream"
CONCURRENCY_METRIC = "SageMakerVariantConcurrentRequestsPerModelHighResolution"
#: Actions IAM defines without a resource type: ``"*"`` is the only valid resource for them.
RESOURCELESS_ACTIONS = {"ecr:GetAuthorizationToken", "cloudwatch:PutMetricData"}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def template_json(cloud_assembly: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(
        (cloud_assembly / f"{STACK}.template.json").read_text(encoding="utf-8")
    )
    return loaded


@pytest.fixture(scope="module")
def template(template_json: dict[str, Any]) -> Template:
    return Template.from_json(template_json)


def test_synth_defines_models_config_and_endpoint(template: Template) -> None:
    template.resource_count_is("AWS::SageMaker::Model", 2)
    template.resource_count_is("AWS::SageMaker::EndpointConfig", 1)
    template.has_resource_properties(
        "AWS::SageMaker::Endpoint",
        {
            "EndpointName": {"Ref": "EndpointName"},
            "EndpointConfigName": {"Fn::GetAtt": ["EndpointConfig", Match.any_value()]},
        },
    )


def test_every_model_silences_the_no_api_key_warning_behind_sagemakers_own_auth(
    template_json: dict[str, Any],
) -> None:
    models = resources(template_json, "AWS::SageMaker::Model")
    assert len(models) == 2
    for model in models.values():
        environment = model["Properties"]["PrimaryContainer"]["Environment"]
        assert environment == {"KOE_ALLOW_UNAUTHENTICATED": "true"}


def test_variants_route_to_the_least_busy_instance_on_parameterized_types(template: Template) -> None:
    routing = {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}
    template.has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "ProductionVariants": [
                Match.object_like(
                    {
                        "VariantName": "gpu",
                        "InstanceType": {"Ref": "InstanceType"},
                        "InitialInstanceCount": {"Ref": "MinInstances"},
                        "RoutingConfig": routing,
                        "InferenceAmiVersion": {"Ref": "InferenceAmiVersion"},
                    }
                ),
                Match.object_like(
                    {
                        "VariantName": "cpu",
                        "InstanceType": {"Ref": "CpuInstanceType"},
                        "RoutingConfig": routing,
                    }
                ),
            ]
        },
    )
    template.has_parameter("InstanceType", {"Type": "String", "Default": "ml.g5.xlarge"})
    template.has_parameter("CpuInstanceType", {"Default": "ml.c7i.xlarge"})


def test_each_variant_scales_on_concurrent_requests_per_model(
    template: Template, template_json: dict[str, Any]
) -> None:
    for variant in ("gpu", "cpu"):
        template.has_resource_properties(
            "AWS::ApplicationAutoScaling::ScalableTarget",
            {
                "ServiceNamespace": "sagemaker",
                "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
                "MinCapacity": {"Ref": "MinInstances"},
                "MaxCapacity": {"Ref": "MaxInstances"},
                "ResourceId": {
                    "Fn::Join": [
                        "",
                        ["endpoint/", {"Fn::GetAtt": ["Endpoint", "EndpointName"]}, f"/variant/{variant}"],
                    ]
                },
            },
        )
    template.resource_count_is("AWS::ApplicationAutoScaling::ScalingPolicy", 2)
    template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "PolicyType": "TargetTrackingScaling",
            "TargetTrackingScalingPolicyConfiguration": Match.object_like(
                {
                    "PredefinedMetricSpecification": {"PredefinedMetricType": CONCURRENCY_METRIC},
                    "TargetValue": {"Ref": "TargetConcurrentRequestsPerModel"},
                }
            ),
        },
    )
    template.has_parameter("MinInstances", {"Type": "Number", "Default": 1, "MinValue": 1})
    template.has_parameter("MaxInstances", {"Type": "Number", "Default": 4})
    # the scaling targets act through SageMaker's service-linked role, not a role the stack would leave unused
    roles = {
        json.dumps(t["Properties"]["RoleARN"])
        for t in resources(template_json, "AWS::ApplicationAutoScaling::ScalableTarget").values()
    }
    assert len(roles) == 1 and "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint" in roles.pop()


def test_no_policy_grants_a_wildcard_action(template_json: dict[str, Any]) -> None:
    found = statements(template_json)
    assert found
    for logical_id, statement in found:
        assert statement["Effect"] == "Allow"
        assert not [a for a in as_list(statement["Action"]) if "*" in a], logical_id
        if statement["Resource"] == "*":
            assert set(as_list(statement["Action"])) <= RESOURCELESS_ACTIONS, (logical_id, statement)


def test_execution_role_is_trusted_by_sagemaker_and_limited_to_image_logs_metrics(
    template_json: dict[str, Any],
) -> None:
    models = resources(template_json, "AWS::SageMaker::Model")
    (role_id,) = {m["Properties"]["ExecutionRoleArn"]["Fn::GetAtt"][0] for m in models.values()}
    role = template_json["Resources"][role_id]
    (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "sagemaker.amazonaws.com"}
    actions = {
        a
        for lid, s in statements(template_json)
        if lid.startswith("ExecutionRole")
        for a in as_list(s["Action"])
    }
    assert {a.split(":")[0] for a in actions} == {"ecr", "logs", "cloudwatch"}
    assert not {"ecr:PutImage", "logs:DeleteLogGroup"} & actions
    metrics = [
        s for lid, s in statements(template_json) if "cloudwatch:PutMetricData" in as_list(s["Action"])
    ]
    assert metrics and all(s["Condition"]["StringEquals"]["cloudwatch:namespace"] for s in metrics)
    for model in models.values():  # the policy exists before SageMaker pulls the image with it
        assert any(d.startswith("ExecutionRoleDefaultPolicy") for d in model["DependsOn"])


def test_agent_role_may_only_invoke_the_bidirectional_stream_of_this_endpoint(
    template_json: dict[str, Any],
) -> None:
    agent = [s for lid, s in statements(template_json) if lid.startswith("AgentRole")]
    assert [as_list(s["Action"]) for s in agent] == [[INVOKE]]
    resource = json.dumps(agent[0]["Resource"])
    assert ":endpoint/" in resource and '{"Ref": "EndpointName"}' in resource
    assert all(
        INVOKE not in as_list(s["Action"])
        for lid, s in statements(template_json)
        if not lid.startswith("AgentRole")
    )


def test_outputs_name_the_endpoint_and_the_roles(template_json: dict[str, Any]) -> None:
    outputs = template_json["Outputs"]
    assert outputs["KoeEndpointName"]["Value"] == {"Fn::GetAtt": ["Endpoint", "EndpointName"]}
    assert {"KoeEndpointArn", "AgentRoleArn", "ExecutionRoleArn"} <= set(outputs)


def test_image_assets_are_the_labelled_dockerfiles_staged_with_what_they_copy(cloud_assembly: Path) -> None:
    manifest = json.loads((cloud_assembly / f"{STACK}.assets.json").read_text(encoding="utf-8"))
    sources = {image["source"]["dockerFile"]: image["source"] for image in manifest["dockerImages"].values()}
    assert set(sources) == {"deploy/gpu.Dockerfile", "deploy/cpu.Dockerfile"}
    for dockerfile, source in sources.items():
        assert source["platform"] == "linux/amd64"
        staged = cloud_assembly / source["directory"]
        parsed = dockerfile_parse.DockerfileParser(str(staged / dockerfile))
        assert parsed.labels["com.amazonaws.sagemaker.capabilities.bidirectional-streaming"] == "true"
        for copy in (i["value"] for i in parsed.structure if i["instruction"] == "COPY"):
            if not copy.startswith("--from"):
                assert all((staged / src).exists() for src in copy.split()[:-1]), (dockerfile, copy)
        assert not (staged / ".venv").exists() and not (staged / "tests").exists()


def test_variants_context_is_validated() -> None:
    sys.path.insert(0, str(CDK_DIR))
    try:
        from koe_cdk.endpoint import parse_variants
    finally:
        sys.path.remove(str(CDK_DIR))
    assert parse_variants(None) == ("gpu",)
    assert parse_variants("cpu, gpu") == ("cpu", "gpu")
    for bad in ("tpu", "gpu,gpu", ","):
        with pytest.raises(ValueError, match="koe:variants"):
            parse_variants(bad)
    assert json.loads((CDK_DIR / "cdk.json").read_text(encoding="utf-8"))["context"]["koe:variants"] == "gpu"
