"""Which AWS resources a tenant's jobs may target: those tagged with its tenant id.

The worker calls AWS targets in a session of the targets role tagged with the tenant
(store/targets.py), and the role allows a target action only on a resource whose tag of this key
has the session's value (infra/jobsched_infra/targets.py). The key is the one an operator puts on a
queue, topic, event bus or function to grant it to a tenant."""
from __future__ import annotations

import re

TENANT_TAG_KEY = "jobsched:tenant"


def grant_hint(tenant_id: str) -> str:
    """What an AccessDenied on a target means, in the words an operator acts on."""
    return f"the target must carry the tag {TENANT_TAG_KEY}={tenant_id} (or match targetArnPatterns)"


def key_grant_hint(tenant_id: str) -> str:
    """What a KMS refusal of a send to an encrypted queue or topic means (infra: grant_target_keys)."""
    return (f"the queue's or topic's KMS key must let the targets role use it (kms:GenerateDataKey and kms:Decrypt "
            f"through SQS/SNS): tag the key {TENANT_TAG_KEY}={tenant_id} (deployed with targetKeys=tagged, the "
            "default) or list it in targetKeyArnPatterns, keep its key policy delegating to IAM, and keep it enabled")


def task_grant_hint(tenant_id: str) -> str:
    """What an AccessDenied on a container task's call means (infra: grant_container_tasks)."""
    return (f"the task definition must carry the tag {TENANT_TAG_KEY}={tenant_id} and match the deployment's "
            "ecsTaskDefinitions, its cluster ecsClusters, and its task and execution roles ecsTaskRoles")


# What STS accepts as a session tag value (letters, digits, spaces and _ . : / = + - @, at most 256).
_TAG_VALUE = re.compile(r"[\w .:/=+\-@]{1,256}")


def is_taggable(tenant_id: str) -> bool:
    """A tenant id that can be a session tag value, hence reach tagged targets."""
    return bool(_TAG_VALUE.fullmatch(tenant_id))
