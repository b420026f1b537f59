"""The voice agent on Amazon Bedrock AgentCore Runtime, speaking through the koe endpoint.

An ECR image asset of ``deploy/agent.Dockerfile`` built for ``linux/arm64`` (the only platform AgentCore
Runtime runs), an ``AWS::BedrockAgentCore::Runtime`` serving it over HTTP (``/invocations``, ``/ws``), its
execution role, and inbound auth chosen by parameter: IAM SigV4 (AgentCore's default) or a JWT authorizer.

The execution role may do exactly what the agent and the runtime need, each for one reason:

* ``sagemaker:InvokeEndpointWithBidirectionalStream`` on the one endpoint: speaking;
* ``bedrock:InvokeModelWithResponseStream`` on the configured model (``ConverseStream`` is authorized by
  it): thinking. A cross-Region inference profile (``us.``, ``eu.``, ``global.`` ...) adds the profile and
  its model in every Region, the latter only through that profile;
* ECR pull of the asset's repository (and ``ecr:GetAuthorizationToken``, which has no resource): the
  runtime pulls the image with this role;
* CloudWatch Logs under ``/aws/bedrock-agentcore/runtimes/<runtime name>-*``, plus ``DescribeLogGroups``
  (group names only): the runtime writes the container's output there with this role.

Not granted: X-Ray, CloudWatch metrics and workload-identity tokens, which AWS's example execution role
lists for agents that trace, publish metrics or call OAuth-protected tools; koe does none of these.
"""

from __future__ import annotations

import re
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_bedrockagentcore as agentcore
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from constructs import Construct

REPO_ROOT = Path(__file__).resolve().parents[3]
AGENT_DOCKERFILE = "deploy/agent.Dockerfile"
INVOKE_ENDPOINT = "sagemaker:InvokeEndpointWithBidirectionalStream"
INVOKE_MODEL = "bedrock:InvokeModelWithResponseStream"
#: What a caller needs to reach the agent: ``/invocations`` and the WebSocket ``/ws``.
INVOKE_AGENT = (
    "bedrock-agentcore:InvokeAgentRuntime",
    "bedrock-agentcore:InvokeAgentRuntimeWithWebSocketStream",
)
#: The default LLM: Amazon Nova Micro through the US cross-Region inference profile (text only, cheap).
DEFAULT_LLM_MODEL = "us.amazon.nova-micro-v1:0"
#: Geography prefixes of cross-Region inference profile ids.
_PROFILE_PREFIX = re.compile(r"^(us|eu|apac|jp|au|ca|us-gov|global)\.")
_MODEL_ID = re.compile(r"^[a-z0-9-]+(\.[a-z0-9-]+)+(:[a-z0-9-]+)*(:\d+)?$")
LOG_GROUP_PREFIX = "/aws/bedrock-agentcore/runtimes"
AUTH_MODES = ("IAM", "JWT")
#: AgentCore's JWT authorizer reads the identity provider's OpenID Connect discovery document.
_DISCOVERY_URL = r"^(https://.+/\.well-known/openid-configuration)?$"


def parse_llm_model(value: object) -> str:
    """The Bedrock model id or inference profile id from the ``koe:llm-model`` context (default Nova Micro).

    Raises:
        ValueError: not a Bedrock model id (``amazon.nova-micro-v1:0``) or profile id (``us.…``).
    """
    model = str(value or DEFAULT_LLM_MODEL).strip()
    if not _MODEL_ID.match(model):
        raise ValueError(f"koe:llm-model must be a Bedrock model or inference profile id, got {value!r}")
    return model


def agent_enabled(value: object) -> bool:
    """The ``koe:agent`` context: ``true`` (default) deploys the agent beside the endpoint, ``false`` not."""
    text = str(True if value is None else value).strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"koe:agent must be true or false, got {value!r}")
    return text == "true"


class KoeAgentStack(cdk.Stack):
    """The agent's runtime, image and roles; ``endpoint_name`` and ``endpoint_arn`` name what it speaks to."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_name: str,
        endpoint_arn: str,
        llm_model: str = DEFAULT_LLM_MODEL,
        env: cdk.Environment | None = None,
    ) -> None:
        super().__init__(scope, construct_id, env=env)
        runtime_name = cdk.CfnParameter(
            self,
            "AgentRuntimeName",
            default="koe_agent",
            allowed_pattern=r"^[a-zA-Z][a-zA-Z0-9_]{0,47}$",
            description="Name of the AgentCore runtime (letters, digits, underscores)",
        ).value_as_string
        auth = cdk.CfnParameter(
            self,
            "AgentAuth",
            default="IAM",
            allowed_values=list(AUTH_MODES),
            description="Who may call the agent: IAM (SigV4, e.g. a presigned URL) or JWT (your IdP)",
        ).value_as_string
        discovery_url = cdk.CfnParameter(
            self,
            "JwtDiscoveryUrl",
            default="",
            allowed_pattern=_DISCOVERY_URL,
            description="With AgentAuth=JWT: the OpenID Connect discovery URL of the identity provider",
        ).value_as_string
        audiences = cdk.CfnParameter(
            self,
            "JwtAllowedAudiences",
            type="CommaDelimitedList",
            default="",
            description="With AgentAuth=JWT: the token audiences (aud) accepted, comma-separated",
        ).value_as_list
        clients = cdk.CfnParameter(
            self,
            "JwtAllowedClients",
            type="CommaDelimitedList",
            default="",
            description="With AgentAuth=JWT: the client ids (client_id) accepted, comma-separated, or any",
        ).value_as_list
        jwt = cdk.CfnCondition(self, "UseJwt", expression=cdk.Fn.condition_equals(auth, "JWT"))
        limit_clients = cdk.CfnCondition(
            self,
            "LimitJwtClients",
            expression=cdk.Fn.condition_not(cdk.Fn.condition_equals(cdk.Fn.join("", clients), "")),
        )
        cdk.CfnRule(
            self,
            "JwtNeedsIssuerAndAudience",
            rule_condition=cdk.Fn.condition_equals(auth, "JWT"),
            assertions=[
                cdk.CfnRuleAssertion(
                    assert_=cdk.Fn.condition_not(cdk.Fn.condition_equals(discovery_url, "")),
                    assert_description="AgentAuth=JWT needs JwtDiscoveryUrl",
                ),
                cdk.CfnRuleAssertion(
                    assert_=cdk.Fn.condition_not(cdk.Fn.condition_contains(audiences, "")),
                    assert_description="AgentAuth=JWT needs JwtAllowedAudiences, none of them empty",
                ),
            ],
        )

        image = ecr_assets.DockerImageAsset(
            self,
            "AgentImage",
            directory=str(REPO_ROOT),
            file=AGENT_DOCKERFILE,
            platform=ecr_assets.Platform.LINUX_ARM64,
            ignore_mode=cdk.IgnoreMode.DOCKER,
        )
        role = iam.Role(
            self,
            "AgentExecutionRole",
            assumed_by=iam.ServicePrincipal(
                "bedrock-agentcore.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": self.account},
                    "ArnLike": {"aws:SourceArn": self._arn("bedrock-agentcore", "*")},
                },
            ),
            description="koe's agent on AgentCore Runtime: speak through its endpoint, ask its model, run",
        )
        role.add_to_policy(iam.PolicyStatement(actions=[INVOKE_ENDPOINT], resources=[endpoint_arn]))
        for statement in self._model_statements(llm_model):
            role.add_to_policy(statement)
        image.repository.grant_pull(role)
        log_group = self._arn("logs", f"log-group:{LOG_GROUP_PREFIX}/{runtime_name}-*")
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogGroup", "logs:DescribeLogStreams"], resources=[log_group]
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[f"{log_group}:log-stream:*"]
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:DescribeLogGroups"],
                resources=[self._arn("logs", "log-group:*")],
            )
        )

        authorizer = cdk.Fn.condition_if(
            jwt.logical_id,
            {
                "CustomJWTAuthorizer": {
                    "DiscoveryUrl": discovery_url,
                    "AllowedAudience": audiences,
                    "AllowedClients": cdk.Fn.condition_if(
                        limit_clients.logical_id, clients, cdk.Aws.NO_VALUE
                    ),
                }
            },
            cdk.Aws.NO_VALUE,
        )
        runtime = agentcore.CfnRuntime(
            self,
            "AgentRuntime",
            agent_runtime_name=runtime_name,
            description="koe's voice agent: the LLM's answer spoken as it is written, through SageMaker",
            agent_runtime_artifact=agentcore.CfnRuntime.AgentRuntimeArtifactProperty(
                container_configuration=agentcore.CfnRuntime.ContainerConfigurationProperty(
                    container_uri=image.image_uri
                )
            ),
            role_arn=role.role_arn,
            network_configuration=agentcore.CfnRuntime.NetworkConfigurationProperty(network_mode="PUBLIC"),
            protocol_configuration="HTTP",
            authorizer_configuration=authorizer,
            environment_variables={
                "KOE_TTS": cdk.Fn.join("", ["sagemaker://", endpoint_name, "?region=", self.region]),
                "KOE_LLM": "bedrock",
                "KOE_LLM_MODEL": llm_model,
                "KOE_LLM_REGION": self.region,
                "KOE_LOG_FORMAT": "json",
                "KOE_LOG_LEVEL": "INFO",
            },
        )
        runtime.node.add_dependency(role)  # the policies exist before the runtime pulls the image with them
        cdk.Validations.of(runtime).acknowledge(
            cdk.Acknowledgment(
                id="CloudFormation-Validate::F3031",
                reason="the JWT authorizer and its discovery URL exist only with AgentAuth=JWT, whose rule "
                "requires the URL",
            )
        )

        invoker = iam.ManagedPolicy(
            self,
            "InvokeAgentPolicy",
            description="Lets a principal call koe's agent (and presign its WebSocket URL for a browser)",
            statements=[
                iam.PolicyStatement(
                    actions=list(INVOKE_AGENT),
                    resources=[
                        runtime.attr_agent_runtime_arn,
                        f"{runtime.attr_agent_runtime_arn}/runtime-endpoint/*",
                    ],
                )
            ],
        )

        # AgentCore's data plane addresses a runtime by its URL-encoded ARN
        encoded_arn = cdk.Fn.join(
            "",
            [
                f"arn%3A{self.partition}%3Abedrock-agentcore%3A{self.region}%3A{self.account}%3Aruntime%2F",
                runtime.attr_agent_runtime_id,
            ],
        )
        host = f"bedrock-agentcore.{self.region}.{self.url_suffix}"
        cdk.CfnOutput(self, "AgentRuntimeArn", value=runtime.attr_agent_runtime_arn)
        cdk.CfnOutput(
            self,
            "AgentInvocationUrl",
            value=cdk.Fn.join(
                "", [f"https://{host}/runtimes/", encoded_arn, "/invocations?qualifier=DEFAULT"]
            ),
            description="POST here (SigV4 or a bearer JWT): Server-Sent Events of one turn",
        )
        cdk.CfnOutput(
            self,
            "AgentWebSocketUrl",
            value=cdk.Fn.join("", [f"wss://{host}/runtimes/", encoded_arn, "/ws"]),
            description="The browser page's socket: presign it with `koe agent-url`, or add a JWT",
        )
        cdk.CfnOutput(self, "AgentExecutionRoleArn", value=role.role_arn)
        cdk.CfnOutput(self, "InvokeAgentPolicyArn", value=invoker.managed_policy_arn)

    def _arn(self, service: str, resource: str) -> str:
        """An ARN of ``service`` in this stack's Region and account."""
        return f"arn:{self.partition}:{service}:{self.region}:{self.account}:{resource}"

    def _model_statements(self, model: str) -> list[iam.PolicyStatement]:
        """``InvokeModelWithResponseStream`` on ``model``: a model in this Region, or an inference profile
        and its model in the Regions it routes to, only through it."""
        if not _PROFILE_PREFIX.match(model):
            arn = f"arn:{self.partition}:bedrock:{self.region}::foundation-model/{model}"
            return [iam.PolicyStatement(actions=[INVOKE_MODEL], resources=[arn])]
        profile = self._arn("bedrock", f"inference-profile/{model}")
        base = model.split(".", 1)[1]
        return [
            iam.PolicyStatement(actions=[INVOKE_MODEL], resources=[profile]),
            iam.PolicyStatement(
                actions=[INVOKE_MODEL],
                resources=[f"arn:{self.partition}:bedrock:*::foundation-model/{base}"],
                conditions={"StringEquals": {"bedrock:InferenceProfileArn": profile}},
            ),
        ]
