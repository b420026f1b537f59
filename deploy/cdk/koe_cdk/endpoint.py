"""The SageMaker real-time endpoint that serves koe over bidirectional streaming, autoscaled.

Per variant: an ECR image asset built from ``deploy/<variant>.Dockerfile`` (the repository root is the
build context, filtered by ``.dockerignore``), a Model, a production variant routed by least outstanding
requests, and target tracking on ``ConcurrentRequestsPerModel`` (every open stream is one request).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as autoscaling
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from koe_cdk.agent import AgentAccess

REPO_ROOT = Path(__file__).resolve().parents[3]
ROUTING_STRATEGY = "LEAST_OUTSTANDING_REQUESTS"
#: SageMaker authenticates every call (IAM, SigV4) before it reaches the container, which listens on 0.0.0.0
#: without an API key: koe's "no API key" warning is expected there, so the switch silences it.
CONTAINER_ENVIRONMENT = {"KOE_ALLOW_UNAUTHENTICATED": "true"}
#: Seconds the container may take to answer /ping after start (image pull + model load on a cold GPU).
STARTUP_HEALTH_CHECK_TIMEOUT_S = 600
SCALE_IN_COOLDOWN_S = 300
SCALE_OUT_COOLDOWN_S = 60
#: SageMaker's log group prefix for endpoints and the namespace of its per-instance metrics.
LOG_GROUP_PREFIX = "/aws/sagemaker/Endpoints"
METRICS_NAMESPACE = "/aws/sagemaker/Endpoints"
AUTOSCALING_SERVICE_ROLE = (
    "aws-service-role/sagemaker.application-autoscaling.amazonaws.com/"
    "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint"
)
#: GPU driver image of GPU variants: NVIDIA driver 550 (CUDA 12.4), for torch's CUDA 12 wheels.
GPU_AMI_VERSION = "al2-ami-sagemaker-inference-gpu-3-1"


@dataclass(frozen=True)
class VariantSpec:
    dockerfile: str
    default_instance_type: str
    instance_parameter: str
    description: str


VARIANTS = {
    "gpu": VariantSpec("deploy/gpu.Dockerfile", "ml.g5.xlarge", "InstanceType", "PyTorch on one A10G"),
    "cpu": VariantSpec("deploy/cpu.Dockerfile", "ml.c7i.xlarge", "CpuInstanceType", "ONNX Runtime int8"),
}


def parse_variants(value: object) -> tuple[str, ...]:
    """``"gpu"``, ``"cpu"`` or ``"gpu,cpu"`` from the CDK context; anything else is a clear error."""
    names = tuple(part.strip() for part in str(value or "gpu").split(",") if part.strip())
    unknown = [name for name in names if name not in VARIANTS]
    if not names or unknown or len(set(names)) != len(names):
        raise ValueError(f"koe:variants must list distinct variants from {sorted(VARIANTS)}, got {value!r}")
    return names


class KoeEndpointStack(cdk.Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        variants: Sequence[str] = ("gpu",),
        env: cdk.Environment | None = None,
    ) -> None:
        super().__init__(scope, construct_id, env=env)
        endpoint_name = cdk.CfnParameter(
            self,
            "EndpointName",
            default="koe",
            # lower case only: the endpoint's ARN (used by the IAM policies) holds the name lower-cased
            allowed_pattern="^[a-z0-9](-*[a-z0-9]){0,62}$",
            description="Name of the SageMaker endpoint (what the agent calls)",
        ).value_as_string
        min_instances = cdk.CfnParameter(
            self,
            "MinInstances",
            type="Number",
            default=1,
            min_value=1,
            description="Instances per variant, at least",
        )
        max_instances = cdk.CfnParameter(
            self,
            "MaxInstances",
            type="Number",
            default=4,
            min_value=1,
            description="Instances per variant, at most",
        )
        target = cdk.CfnParameter(
            self,
            "TargetConcurrentRequestsPerModel",
            type="Number",
            default=10,
            min_value=1,
            description="Open streams per instance that target tracking keeps (measure with `koe bench`)",
        )
        endpoint_arn = self.format_arn(service="sagemaker", resource="endpoint", resource_name=endpoint_name)

        role = iam.Role(
            self,
            "ExecutionRole",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"),
            description="koe's SageMaker execution role: pull its image, write its logs and metrics",
        )
        log_group = self.format_arn(
            service="logs",
            resource="log-group",
            resource_name=f"{LOG_GROUP_PREFIX}/{endpoint_name}",
            arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=[
                    "logs:CreateLogGroup",
                    "logs:CreateLogStream",
                    "logs:PutLogEvents",
                    "logs:DescribeLogStreams",
                ],
                resources=[log_group, f"{log_group}:log-stream:*"],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],  # PutMetricData has no resource type; the condition scopes it instead
                conditions={"StringEquals": {"cloudwatch:namespace": METRICS_NAMESPACE}},
            )
        )

        production_variants = []
        models = []
        for name in variants:
            spec = VARIANTS[name]
            instance_type = cdk.CfnParameter(
                self,
                spec.instance_parameter,
                default=spec.default_instance_type,
                allowed_pattern=r"^ml\.[a-z0-9]+\.[a-z0-9]+$",
                description=f"Instance type of the {name} variant ({spec.description})",
            ).value_as_string
            image = ecr_assets.DockerImageAsset(
                self,
                f"{name.capitalize()}Image",
                directory=str(REPO_ROOT),
                file=spec.dockerfile,
                platform=ecr_assets.Platform.LINUX_AMD64,
                ignore_mode=cdk.IgnoreMode.DOCKER,
            )
            image.repository.grant_pull(role)
            ami = None
            if name == "gpu":
                ami = cdk.CfnParameter(
                    self,
                    "InferenceAmiVersion",
                    default=GPU_AMI_VERSION,
                    description="Driver image of the GPU variant (must support torch's CUDA major)",
                ).value_as_string
            model = sagemaker.CfnModel(
                self,
                f"{name.capitalize()}Model",
                execution_role_arn=role.role_arn,
                primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                    image=image.image_uri, environment=CONTAINER_ENVIRONMENT
                ),
            )
            model.node.add_dependency(role)  # the policy must exist before SageMaker pulls the image
            models.append(model)
            production_variants.append(
                sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                    variant_name=name,
                    model_name=model.attr_model_name,
                    instance_type=instance_type,
                    initial_instance_count=min_instances.value_as_number,
                    initial_variant_weight=1,
                    routing_config=sagemaker.CfnEndpointConfig.RoutingConfigProperty(
                        routing_strategy=ROUTING_STRATEGY
                    ),
                    container_startup_health_check_timeout_in_seconds=STARTUP_HEALTH_CHECK_TIMEOUT_S,
                    inference_ami_version=ami,
                )
            )

        config = sagemaker.CfnEndpointConfig(self, "EndpointConfig", production_variants=production_variants)
        endpoint = sagemaker.CfnEndpoint(
            self,
            "Endpoint",
            endpoint_config_name=config.attr_endpoint_config_name,
            endpoint_name=endpoint_name,
        )

        # Application Auto Scaling acts for SageMaker through its service-linked role; a role of our own
        # would be unused, so the stack names that one instead of creating another
        autoscaling_role = iam.Role.from_role_arn(
            self,
            "AutoscalingRole",
            self.format_arn(
                service="iam",
                region="",
                resource="role",
                resource_name=AUTOSCALING_SERVICE_ROLE,
            ),
        )
        for name in variants:
            scaling = autoscaling.ScalableTarget(
                self,
                f"{name.capitalize()}Scaling",
                role=autoscaling_role,
                service_namespace=autoscaling.ServiceNamespace.SAGEMAKER,
                scalable_dimension="sagemaker:variant:DesiredInstanceCount",
                resource_id=f"endpoint/{endpoint.attr_endpoint_name}/variant/{name}",
                min_capacity=min_instances.value_as_number,
                max_capacity=max_instances.value_as_number,
            )
            scaling.node.add_dependency(endpoint)
            scaling.scale_to_track_metric(
                "ConcurrentRequests",
                target_value=target.value_as_number,
                predefined_metric=autoscaling.PredefinedMetric.SAGEMAKER_VARIANT_CONCURRENT_REQUESTS_PER_MODEL_HIGH_RESOLUTION,
                scale_in_cooldown=cdk.Duration.seconds(SCALE_IN_COOLDOWN_S),
                scale_out_cooldown=cdk.Duration.seconds(SCALE_OUT_COOLDOWN_S),
            )

        #: what the agent's stack speaks to (deploy/cdk/koe_cdk/runtime.py)
        self.endpoint_name: str = endpoint.attr_endpoint_name
        self.endpoint_arn: str = endpoint_arn
        agent = AgentAccess(self, "Agent", endpoint_arn=endpoint_arn)
        cdk.CfnOutput(self, "KoeEndpointName", value=endpoint.attr_endpoint_name)
        cdk.CfnOutput(self, "KoeEndpointArn", value=endpoint_arn)
        cdk.CfnOutput(self, "ExecutionRoleArn", value=role.role_arn)
        cdk.CfnOutput(self, "AgentRoleArn", value=agent.role.role_arn)
