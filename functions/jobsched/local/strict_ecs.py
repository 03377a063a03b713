"""What ECS does to a task's tags, which the emulator (moto) does not, for the strict layer's IAM
check of `aws:ResourceTag` on tasks (local/strict_aws.py calls `after_call` after each ECS call):

- RunTask with `propagateTags=TASK_DEFINITION` gives each new task its task definition's tags (ECS
  API reference, RunTask `propagateTags`), beside the call's own `tags` (which win a shared key);
- StopTask deletes the task's tags (ECS API reference, StopTask: "Any tags associated with the task
  will be deleted"), so a stopped task is matched by no tag condition afterwards.

Both are made with unchecked calls (`internal`: the strict layer's own context variable)."""
from __future__ import annotations

import contextvars

from botocore.exceptions import ClientError


def after_call(client, operation: str, params: dict, parsed: dict, internal: contextvars.ContextVar) -> None:
    """`client`: an ECS client of the emulator; the call's request `params` and answer `parsed`."""
    token = internal.set(True)
    try:
        if operation == "RunTask" and params.get("propagateTags") == "TASK_DEFINITION":
            for task in parsed.get("tasks") or []:
                _propagate(client, task, params)
        elif operation == "StopTask" and params.get("task"):
            _delete_tags(client, params["task"], params)
    except ClientError:
        pass  # a task the emulator no longer lists: nothing to tag
    finally:
        internal.reset(token)


def tags_of(client, resource: str) -> dict[str, str]:
    """A task definition's or a task's tags (the resources the targets role's ECS conditions name);
    none for anything else, or for a pattern (RunTask's TagResource on `task/<cluster>/*`)."""
    if (":task-definition/" not in resource and ":task/" not in resource) or resource.endswith("*"):
        return {}
    return {t["key"]: t["value"] for t in client.list_tags_for_resource(resourceArn=resource).get("tags", [])}


def _propagate(client, task: dict, params: dict) -> None:
    definition = task.get("taskDefinitionArn") or params.get("taskDefinition")
    inherited = client.list_tags_for_resource(resourceArn=definition).get("tags") or []
    own = {t["key"] for t in params.get("tags") or []}
    added = [t for t in inherited if t["key"] not in own]
    if added:
        client.tag_resource(resourceArn=task["taskArn"], tags=added)


def _delete_tags(client, task: str, params: dict) -> None:
    if not task.startswith("arn:"):
        return
    keys = [t["key"] for t in client.list_tags_for_resource(resourceArn=task).get("tags") or []]
    if keys:
        client.untag_resource(resourceArn=task, tagKeys=keys)
