#!/usr/bin/env python3
"""CDK app: `make synth` (offline, no credentials) and `make deploy`.

`-c regions=a,b,...` (2..9 regions, jobsched_infra/regions.py): one stack per region,
`Jobsched-<region>`; without it, or with one region, the single stack `Jobsched` as before."""
import os
import sys

import aws_cdk as cdk

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from jobsched_infra.compliance import apply_checks  # noqa: E402
from jobsched_infra.deployment import build_regions  # noqa: E402
from jobsched_infra.stack import JobschedStack, StackConfig  # noqa: E402

app = cdk.App()
config = StackConfig.from_context(app.node)
if len(config.regions) > 1:
    build_regions(app, config)
else:
    JobschedStack(app, "Jobsched", config=config)
apply_checks(app)
app.synth()
