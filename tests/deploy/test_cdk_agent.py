"""The agent's stack (``KoeAgent``): AgentCore Runtime, its arm64 image asset, its execution role with exactly
the actions the agent and the runtime need, inbound auth by parameter, and the URLs it outputs.

The app is synthesized as ``cdk synth`` runs it (tests/deploy/conftest.py); CDK's own CloudFormation
schema validation runs during that synthesis and its report is asserted clean. What needs an account —
creating the runtime, AgentCore pulling the image, the role working — is not checked here.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aws_cdk", reason="deploy extra missing: pip install 'koe[deploy]'")
dockerfile_parse = pytest.importorskip(
    "dockerfile_parse", reason="deploy extra missing: pip install 'koe[deploy]'"
)

from cdk_template import CDK_DIR, as_list, load, resources, statements, synth  # noqa: E402

STACK = "KoeAgent"
INVOKE_ENDPOINT = "sagemaker:InvokeEndpointWithBidirectionalStream"
INVOKE_MODEL = "bedrock:InvokeModelWithResponseStream"
#: The runtime's own needs: pulling its image, writing its logs.
RUNTIME_ACTIONS = {
    "ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer", "ecr:BatchGetImage",
    "ecr:GetAuthorizationToken",
    "logs:CreateLogGroup", "logs:DescribeLogStreams", "logs:CreateLogStream", "logs:PutLogEvents",
    "logs:DescribeLogGroups",
}  # fmt: skip
#: The one action IAM defines without a resource type among those.
RESOURCELESS = {"ecr:GetAuthorizationToken"}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def agent(cloud_assembly: Path) -> dict[str, Any]:
    return load(cloud_assembly, f"{STACK}.template.json")


@pytest.fixture(scope="module")
def runtime(agent: dict[str, Any]) -> dict[str, Any]:
    (found,) = resources(agent, "AWS::BedrockAgentCore::Runtime").values()
    return found


def execution_statements(agent: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for logical_id, s in statements(agent) if logical_id.startswith("AgentExecutionRole")]


def flat(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def test_one_app_deploys_the_endpoint_and_the_agent_that_speaks_through_it(
    cloud_assembly: Path, runtime: dict[str, Any]
) -> None:
    manifest = load(cloud_assembly, "manifest.json")
    stacks = {k for k, v in manifest["artifacts"].items() if v["type"] == "aws:cloudformation:stack"}
    assert stacks == {"KoeEndpoint", "KoeAgent"}
    assert "KoeEndpoint" in manifest["artifacts"]["KoeAgent"]["dependencies"]
    tts = runtime["Properties"]["EnvironmentVariables"]["KOE_TTS"]
    assert tts["Fn::Join"][1][0] == "sagemaker://" and "ImportValue" in flat(tts)  # the endpoint stack's name
    assert "?region=" in flat(tts) and '{"Ref": "AWS::Region"}' in flat(tts)


def test_cloudformations_schema_validation_finds_nothing(cloud_assembly: Path) -> None:
    report = load(cloud_assembly, "validation-report.json")
    for plugin in report["pluginReports"]:
        assert plugin["violations"] == [], plugin["pluginName"]
        # the one acknowledged: the JWT branch's discovery URL, empty by default, is used only with JWT
        assert {v["ruleName"] for v in plugin.get("suppressedViolations", [])} <= {"F3031"}


def test_the_runtime_serves_the_image_over_http_with_bedrock_as_its_llm(runtime: dict[str, Any]) -> None:
    props = runtime["Properties"]
    assert props["AgentRuntimeName"] == {"Ref": "AgentRuntimeName"}
    assert props["ProtocolConfiguration"] == "HTTP"
    assert props["NetworkConfiguration"] == {"NetworkMode": "PUBLIC"}  # SageMaker's and Bedrock's endpoints
    uri = flat(props["AgentRuntimeArtifact"]["ContainerConfiguration"]["ContainerUri"])
    assert "container-assets" in uri and ".dkr.ecr." in uri
    env = props["EnvironmentVariables"]
    assert env["KOE_LLM"] == "bedrock" and env["KOE_LLM_MODEL"] == "us.amazon.nova-micro-v1:0"
    assert env["KOE_LLM_REGION"] == {"Ref": "AWS::Region"}
    assert props["RoleArn"]["Fn::GetAtt"][0].startswith("AgentExecutionRole")
    # the policies exist before the runtime pulls its image with the role
    assert any(d.startswith("AgentExecutionRoleDefaultPolicy") for d in runtime["DependsOn"])


def test_the_agent_image_asset_is_the_arm64_agent_dockerfile_with_what_it_copies(
    cloud_assembly: Path,
) -> None:
    manifest = load(cloud_assembly, f"{STACK}.assets.json")
    (source,) = [image["source"] for image in manifest["dockerImages"].values()]
    assert source["dockerFile"] == "deploy/agent.Dockerfile"
    assert source["platform"] == "linux/arm64"  # AgentCore Runtime runs arm64 only
    staged = cloud_assembly / source["directory"]
    parsed = dockerfile_parse.DockerfileParser(str(staged / source["dockerFile"]))
    for copy in (i["value"] for i in parsed.structure if i["instruction"] == "COPY"):
        if not copy.startswith("--from"):
            assert all((staged / src).exists() for src in copy.split()[:-1]), copy
    assert not (staged / ".venv").exists() and not (staged / "tests").exists()


def test_the_execution_role_is_assumed_only_by_agentcore_for_this_account(agent: dict[str, Any]) -> None:
    (role,) = [
        r for lid, r in resources(agent, "AWS::IAM::Role").items() if lid.startswith("AgentExecutionRole")
    ]
    (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "bedrock-agentcore.amazonaws.com"}
    assert trust["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    assert ":bedrock-agentcore:" in flat(trust["Condition"]["ArnLike"]["aws:SourceArn"])
    assert role["Properties"].get("ManagedPolicyArns") is None and role["Properties"].get("Policies") is None


def test_the_execution_role_has_exactly_the_actions_it_needs(agent: dict[str, Any]) -> None:
    actions = {a for s in execution_statements(agent) for a in as_list(s["Action"])}
    assert actions == {INVOKE_ENDPOINT, INVOKE_MODEL} | RUNTIME_ACTIONS
    assert all(s["Effect"] == "Allow" for s in execution_statements(agent))


def test_it_may_stream_to_the_one_endpoint_only(agent: dict[str, Any]) -> None:
    (speak,) = [s for s in execution_statements(agent) if INVOKE_ENDPOINT in as_list(s["Action"])]
    assert as_list(speak["Action"]) == [INVOKE_ENDPOINT]
    resource = flat(speak["Resource"])
    assert ":endpoint/" in resource and "ImportValue" in resource and "*" not in resource


def test_it_may_ask_the_configured_model_through_its_profile_only(agent: dict[str, Any]) -> None:
    ask = [s for s in execution_statements(agent) if INVOKE_MODEL in as_list(s["Action"])]
    assert all(as_list(s["Action"]) == [INVOKE_MODEL] for s in ask)
    profile, model = sorted(ask, key=lambda s: "Condition" in s)
    assert flat(profile["Resource"]).endswith(':inference-profile/us.amazon.nova-micro-v1:0"]]}')
    assert flat(model["Resource"]).endswith(':bedrock:*::foundation-model/amazon.nova-micro-v1:0"]]}')
    # the model in other Regions only as the profile routes there, never directly
    assert model["Condition"]["StringEquals"]["bedrock:InferenceProfileArn"] == profile["Resource"]


def test_logs_go_only_under_the_runtimes_own_group_and_nothing_else_is_global(agent: dict[str, Any]) -> None:
    for statement in execution_statements(agent):
        resource = flat(statement["Resource"])
        actions = set(as_list(statement["Action"]))
        if statement["Resource"] == "*":
            assert actions <= RESOURCELESS, statement
        if actions & {"logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"}:
            assert (
                ':log-group:/aws/bedrock-agentcore/runtimes/", {"Ref": "AgentRuntimeName"}, "-*' in resource
            )
        if actions & {"ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"}:
            assert ":repository/" in resource and "container-assets" in resource
    for _, statement in statements(agent):
        assert not [a for a in as_list(statement["Action"]) if "*" in a]  # no wildcard actions anywhere


def test_inbound_auth_is_iam_by_default_or_a_jwt_authorizer_from_parameters(
    agent: dict[str, Any], runtime: dict[str, Any]
) -> None:
    parameters = agent["Parameters"]
    assert (
        parameters["AgentAuth"]["AllowedValues"] == ["IAM", "JWT"]
        and parameters["AgentAuth"]["Default"] == "IAM"
    )
    assert parameters["JwtAllowedAudiences"]["Type"] == "CommaDelimitedList"
    assert parameters["JwtDiscoveryUrl"]["AllowedPattern"].endswith(r"/\.well-known/openid-configuration)?$")
    condition, jwt, iam = runtime["Properties"]["AuthorizerConfiguration"]["Fn::If"]
    assert condition == "UseJwt" and iam == {"Ref": "AWS::NoValue"}  # no authorizer: AgentCore's SigV4
    assert agent["Conditions"]["UseJwt"] == {"Fn::Equals": [{"Ref": "AgentAuth"}, "JWT"]}
    authorizer = jwt["CustomJWTAuthorizer"]
    assert authorizer["DiscoveryUrl"] == {"Ref": "JwtDiscoveryUrl"}
    assert authorizer["AllowedAudience"] == {"Ref": "JwtAllowedAudiences"}
    assert authorizer["AllowedClients"]["Fn::If"][1] == {"Ref": "JwtAllowedClients"}
    # JWT without an issuer or an audience is refused before anything is created
    rule = agent["Rules"]["JwtNeedsIssuerAndAudience"]
    assert rule["RuleCondition"] == {"Fn::Equals": [{"Ref": "AgentAuth"}, "JWT"]}
    assert {"JwtDiscoveryUrl", "JwtAllowedAudiences"} <= {
        a["Assert"]["Fn::Not"][0][next(iter(a["Assert"]["Fn::Not"][0]))][0]["Ref"] for a in rule["Assertions"]
    }


def test_outputs_are_the_agents_invocation_and_websocket_urls(agent: dict[str, Any]) -> None:
    outputs = agent["Outputs"]
    invocation = flat(outputs["AgentInvocationUrl"]["Value"])
    socket = flat(outputs["AgentWebSocketUrl"]["Value"])
    for url, scheme, path in (
        (invocation, "https://", "/invocations?qualifier=DEFAULT"),
        (socket, "wss://", "/ws"),
    ):
        assert f'"{scheme}bedrock-agentcore."' in url and url.endswith(f'"{path}"]]}}')
        # AgentCore addresses a runtime by its URL-encoded ARN
        assert '"/runtimes/arn%3A"' in url and "%3Aruntime%2F" in url and '"AgentRuntimeId"' in url
    assert {"AgentRuntimeArn", "AgentExecutionRoleArn", "InvokeAgentPolicyArn"} <= set(outputs)


def test_the_invoke_policy_lets_a_caller_reach_this_agent_and_nothing_else(agent: dict[str, Any]) -> None:
    (policy,) = resources(agent, "AWS::IAM::ManagedPolicy").values()
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert set(as_list(statement["Action"])) == {
        "bedrock-agentcore:InvokeAgentRuntime", "bedrock-agentcore:InvokeAgentRuntimeWithWebSocketStream",
    }  # fmt: skip
    assert all("AgentRuntimeArn" in flat(r) for r in as_list(statement["Resource"]))


# --- context: the endpoint alone, another model ----------------------------------------------------------


def test_koe_agent_false_deploys_the_endpoint_alone(tmp_path: Path) -> None:
    out = synth(tmp_path, {"koe:agent": "false"})
    assert (out / "KoeEndpoint.template.json").exists() and not (out / "KoeAgent.template.json").exists()


@pytest.fixture(scope="module")
def runtime_module() -> Iterator[Any]:
    sys.path.insert(0, str(CDK_DIR))
    try:
        import koe_cdk.runtime

        yield koe_cdk.runtime
    finally:
        sys.path.remove(str(CDK_DIR))


def test_a_model_in_the_region_is_granted_without_any_profile(runtime_module: Any) -> None:
    import aws_cdk as cdk
    from aws_cdk.assertions import Template

    app = cdk.App()
    stack = runtime_module.KoeAgentStack(
        app, "Plain", endpoint_name="koe", endpoint_arn="arn:aws:sagemaker:us-east-1:1:endpoint/koe",
        llm_model="amazon.nova-lite-v1:0",
    )  # fmt: skip
    template = Template.from_stack(stack).to_json()
    ask = [s for lid, s in statements(template) if INVOKE_MODEL in as_list(s["Action"])]
    (only,) = ask
    assert flat(only["Resource"]).endswith(':foundation-model/amazon.nova-lite-v1:0"]]}')
    assert '{"Ref": "AWS::Region"}' in flat(only["Resource"]) and "Condition" not in only


def test_the_context_values_are_validated(runtime_module: Any) -> None:
    assert runtime_module.parse_llm_model(None) == "us.amazon.nova-micro-v1:0"
    assert runtime_module.parse_llm_model("anthropic.claude-3-haiku-20240307-v1:0").startswith("anthropic.")
    for bad in ("nova", "us.amazon.nova micro", "arn:aws:bedrock:x"):
        with pytest.raises(ValueError, match="koe:llm-model"):
            runtime_module.parse_llm_model(bad)
    assert runtime_module.agent_enabled(None) is True and runtime_module.agent_enabled("False") is False
    with pytest.raises(ValueError, match="koe:agent"):
        runtime_module.agent_enabled("no")
