"""ECS: RunTask's authorization (the task definition, the new task's tags, the roles passed) and
Fargate's rates per account and Region."""
from __future__ import annotations

from botocore.exceptions import ClientError

from jobsched.local.strict_aws.base import ACCOUNT, REGION, _Call, _error, _internal


def _cluster_name(params: dict) -> str:
    cluster = params.get("cluster") or "default"
    return cluster.rsplit("/", 1)[-1] if cluster.startswith("arn:") else cluster


def _task_definition_arn(value: str) -> str:
    """RunTask's taskDefinition (an ARN, or family:revision) as the ARN IAM sees."""
    return value if value.startswith("arn:") else f"arn:aws:ecs:{REGION}:{ACCOUNT}:task-definition/{value}"


class EcsChecks:
    """ECS for the strict layer (a mixin of StrictAws): what RunTask needs authorized, and
    Fargate's rates."""

    def _run_task_actions(self, call: _Call) -> list[tuple[str, str]]:
        """ECS authorizes RunTask on the task definition, ecs:TagResource on the new task when the
        call tags it (ecs:CreateAction = RunTask), and iam:PassRole for each role the task will
        use: its task definition's task and execution roles, and those the overrides name."""
        p = call.params
        definition = _task_definition_arn(p.get("taskDefinition", ""))
        pairs = [("ecs:RunTask", definition)]
        if p.get("tags"):
            pairs.append(("ecs:TagResource", f"arn:aws:ecs:{REGION}:{ACCOUNT}:task/{_cluster_name(p)}/*"))
        roles = [(p.get("overrides") or {}).get(k) for k in ("taskRoleArn", "executionRoleArn")]
        token = _internal.set(True)
        try:
            described = self._tag_client("ecs").describe_task_definition(taskDefinition=definition)["taskDefinition"]
            roles += [described.get("taskRoleArn"), described.get("executionRoleArn")]
        except ClientError:
            pass  # no such task definition: ECS answers that, after IAM
        finally:
            _internal.reset(token)
        pairs += [("iam:PassRole", role) for role in dict.fromkeys(r for r in roles if r)]
        return pairs

    def _check_ecs(self, client, call: _Call) -> None:
        """RunTask over Fargate's rates (the calls', then the tasks launched) is throttled."""
        if call.operation != "RunTask":
            return
        now = self.now_ms()
        if not (self.ledger.take_tokens("ecs:RunTask", now, *self.limits.run_task_calls)
                and self.ledger.take_tokens("fargate:launches", now, *self.limits.fargate_launches,
                                            count=int(call.params.get("count") or 1))):
            raise _error(client, call.operation, "ThrottlingException", "Rate exceeded", 400)
