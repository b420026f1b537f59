"""`cdk deploy` entry point: the koe endpoint on SageMaker AI, and the voice agent on AgentCore Runtime
speaking through it (two stacks: ``KoeEndpoint``, ``KoeAgent``).

Context (``cdk deploy -c name=value``): ``koe:variants`` picks the endpoint's production variants, ``gpu``
(default), ``cpu`` or ``gpu,cpu``; ``koe:agent`` ``false`` leaves the agent out (the endpoint alone);
``koe:llm-model`` is the agent's Bedrock model or inference profile id (its IAM policy names it).
Instance types, scaling bounds and the agent's inbound auth are CloudFormation parameters.
"""

from __future__ import annotations

import aws_cdk as cdk
from koe_cdk.endpoint import KoeEndpointStack, parse_variants
from koe_cdk.runtime import KoeAgentStack, agent_enabled, parse_llm_model

app = cdk.App()
context = app.node.try_get_context
endpoint = KoeEndpointStack(app, "KoeEndpoint", variants=parse_variants(context("koe:variants")))
if agent_enabled(context("koe:agent")):
    KoeAgentStack(
        app,
        "KoeAgent",
        endpoint_name=endpoint.endpoint_name,
        endpoint_arn=endpoint.endpoint_arn,
        llm_model=parse_llm_model(context("koe:llm-model")),
    )
app.synth()
