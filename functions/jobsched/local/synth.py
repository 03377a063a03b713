"""Synthesize the CDK app in-process, so the local stack runs what `cdk deploy` would create."""
from __future__ import annotations

import json
import os
from pathlib import Path


def synthesize(outdir: Path, segments: int = 4, allow_private_targets: bool = True) -> dict:
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")  # see local/fake_aws.py
    import aws_cdk as cdk

    from jobsched_infra.compliance import apply_checks
    from jobsched_infra.stack import JobschedStack, StackConfig

    app = cdk.App(outdir=str(outdir))
    config = StackConfig(segments=segments, allow_private_targets=allow_private_targets)
    JobschedStack(app, "Jobsched", config=config)
    apply_checks(app)  # cdk-nag: a finding without an acknowledgement fails synthesis
    app.synth()
    return json.loads((Path(outdir) / "Jobsched.template.json").read_text())
