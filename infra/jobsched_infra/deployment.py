"""The stacks of a deployment in several regions (`-c regions=a,b,...`, regions.py): one scheduler
stack per region, built from the plan. Apart from regions.py so that the plan and the names the
stacks share import nothing of the stack that uses them (one way: deployment -> stack -> regions)."""
from __future__ import annotations

import os

import aws_cdk as cdk

from jobsched_infra.regions import plan, stack_name
from jobsched_infra.stack import JobschedStack


def build_regions(app, config) -> list:
    """One scheduler stack per region, in the deployment order the plan needs (see
    RegionPlan.data_home): the first region (the multi-Region key's primary), then the others (each
    with its replica key, the primary's ARN taken across regions by CDK's cross-region references:
    an SSM parameter the first stack writes into each region), the last one holding the global
    tables. The account comes from the CLI's credentials at deploy (CDK_DEFAULT_ACCOUNT), or stays
    unresolved for an offline synthesis."""
    regions_plan = plan(config.regions, config.ownership_regions, config.segments)
    account = os.environ.get("CDK_DEFAULT_ACCOUNT")
    kms = config.encryption == "kms"
    stacks = []
    for region in regions_plan.regions:
        primary = stacks[0] if stacks else None
        stack = JobschedStack(
            app, stack_name(region), config=config, plan=regions_plan,
            primary_key_arn=primary.storage.key.key_arn if primary is not None and kms else None,
            env=cdk.Environment(account=account, region=region),
            cross_region_references=kms,
        )
        if primary is not None and kms:
            # Strong (CDK's default): the first stack cannot remove the key ARN it exports while a
            # replica region's stack reads it, which is what the replica keys need.
            cdk.Annotations.of(stack).acknowledge_warning(
                "@aws-cdk/core:crossStackReferencesDefaultStrong",
                "the multi-Region key's ARN is a strong reference on purpose (its replicas depend on it)")
        for earlier in stacks[1:] if region == regions_plan.data_home else []:
            stack.add_stack_dependency(earlier, "the global tables' replicas need this region's replica key")
        stacks.append(stack)
    return stacks
