"""The role a voice agent assumes to talk to the endpoint: one action, on one endpoint."""

from __future__ import annotations

from aws_cdk import aws_iam as iam
from constructs import Construct

INVOKE_ACTION = "sagemaker:InvokeEndpointWithBidirectionalStream"


class AgentAccess(Construct):
    """An IAM role allowed only ``InvokeEndpointWithBidirectionalStream`` on ``endpoint_arn``.

    It trusts the deploying account; narrow ``principal`` to the agent's own role or service in production.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        endpoint_arn: str,
        principal: iam.IPrincipal | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=principal or iam.AccountRootPrincipal(),
            description="Lets a voice agent stream text to the koe endpoint and audio back, nothing else",
        )
        self.role.add_to_policy(iam.PolicyStatement(actions=[INVOKE_ACTION], resources=[endpoint_arn]))
