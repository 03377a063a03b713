#!/usr/bin/env python3
"""CDK app: `make synth` (offline, no credentials) and `make deploy`."""
import os
import sys

import aws_cdk as cdk

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from jobsched_infra.compliance import apply_checks  # noqa: E402
from jobsched_infra.stack import JobschedStack, StackConfig  # noqa: E402

app = cdk.App()
JobschedStack(app, "Jobsched", config=StackConfig.from_context(app.node))
apply_checks(app)
app.synth()
