"""`cdk deploy` entry point: one stack with the koe endpoint and the role an agent uses to call it.

Context ``koe:variants`` picks the production variants: ``gpu`` (default), ``cpu`` or ``gpu,cpu``
(``cdk deploy -c koe:variants=gpu,cpu``). Instance types and scaling bounds are CloudFormation parameters.
"""

from __future__ import annotations

import aws_cdk as cdk
from koe_cdk.endpoint import KoeEndpointStack, parse_variants

app = cdk.App()
KoeEndpointStack(app, "KoeEndpoint", variants=parse_variants(app.node.try_get_context("koe:variants")))
app.synth()
