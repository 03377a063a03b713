"""Authorization: which (action, resource) pairs a call needs, the context its conditions see,
and the decision (an explicit Deny wins; no Allow is a denial) answered as each service answers."""
from __future__ import annotations

from typing import Any, Callable

from botocore.exceptions import ClientError

from jobsched.local import strict_ecs
from jobsched.local.strict_aws.base import ACCESS_DENIED, ACCOUNT, REGION, _Call, _error, _internal
from jobsched.local.strict_aws.ecs import _cluster_name
from jobsched.local.strict_aws.iam import Statement
from jobsched.local.strict_aws.kms import _moto_ciphertext_key
from jobsched.local.strict_aws.sqs import _queue_arn


# Batch operations that IAM authorizes with the single action.
IAM_ACTION_OF = {
    ("sqs", "SendMessageBatch"): "sqs:SendMessage",
    ("sqs", "DeleteMessageBatch"): "sqs:DeleteMessage",
    ("sqs", "ChangeMessageVisibilityBatch"): "sqs:ChangeMessageVisibility",
    ("sns", "PublishBatch"): "sns:Publish",
    ("lambda", "Invoke"): "lambda:InvokeFunction",
}

# The action IAM checks for each item of a DynamoDB transaction.
TRANSACTION_ACTIONS = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem",
                       "ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}


class Authorization:
    """The layer's IAM check of a call (a mixin of StrictAws): the caller's statements decide each
    (action, resource) the call needs, with the request's condition context and, where a
    statement names them, the resource's tags."""

    def _authorize(self, client, who: str, statements: list[Statement], call: _Call, principal: str | None = None,
                   principal_tags: dict[str, str] | None = None) -> None:
        action = IAM_ACTION_OF.get((call.service, call.operation), f"{call.service}:{call.operation}")
        context = self._condition_context(call, principal, principal_tags)
        if call.service == "sts" and call.operation == "AssumeRole":
            self._authorize_assume_role(client, who, statements, call, principal, context)
            return
        # A transaction is authorized item by item, by each item's own action (_actions_on).
        for item_action, resource in self._actions_on(call, action):
            resource_context = {**context, **self._resource_tags(call, resource, statements)}
            self._decide(client, who, statements + self.template.resource_denies, item_action, resource,
                         resource_context, call)

    def _decide(self, client, who: str, statements: list[Statement], action: str, resource: str, context: dict,
                call: _Call, denied_by_trust: bool = False,
                refuse: Callable[[str], ClientError] | None = None) -> None:
        denied = any(not s.allow and s.applies(action, resource, context) for s in statements)
        allowed = any(s.allow and s.applies(action, resource, context) for s in statements)
        if denied or not allowed or denied_by_trust:
            self.ledger.denied.append(f"{who}:{action}")
            role = f"arn:aws:sts::{ACCOUNT}:assumed-role/jobsched-{who}/jobsched-{who}"
            how = "with an explicit deny in an identity-based policy" if denied \
                else "because no identity-based policy allows the" if not denied_by_trust \
                else "because the role's trust policy does not allow the"
            message = (f"User: {role} is not authorized to perform: {action} on resource: {resource} "
                       f"{how} {action} action")
            if refuse is not None:  # another service's call made for the caller (SSE-KMS), in that service's words
                raise refuse(message)
            code, status = ACCESS_DENIED.get(call.service, ("AccessDeniedException", 400))
            raise _error(client, call.operation, code, message, status)
        self.ledger.allowed.add((who, action))

    def _actions_on(self, call: _Call, action: str) -> list[tuple[str, str]]:
        """(IAM action, resource) pairs a call needs. A transaction has no action of its own: IAM
        authorizes each of its items by the underlying action (Put → dynamodb:PutItem, ConditionCheck
        → dynamodb:ConditionCheckItem; AWS, "Using IAM with DynamoDB transactions")."""
        if call.service == "ecs" and call.operation == "RunTask":
            return self._run_task_actions(call)
        if call.service == "dynamodb" and call.operation in ("TransactWriteItems", "TransactGetItems"):
            return list(dict.fromkeys(
                (f"dynamodb:{TRANSACTION_ACTIONS[kind]}", self._table_arn(entry["TableName"]))
                for item in call.params.get("TransactItems", []) for kind, entry in item.items()))
        return [(action, resource) for resource in self._resources_of(call)]

    @staticmethod
    def _condition_context(call: _Call, principal: str | None = None,
                           principal_tags: dict[str, str] | None = None) -> dict[str, Any]:
        context: dict[str, Any] = {"aws:securetransport": "true", "aws:requestedregion": REGION}
        if call.service == "ecs":
            # ECS's keys: the cluster a call acts in; which call creates (and so tags) a resource;
            # the service a role is passed to (RunTask passes its roles to ECS's tasks).
            context["ecs:cluster"] = f"arn:aws:ecs:{REGION}:{ACCOUNT}:cluster/{_cluster_name(call.params)}"
            if call.operation == "RunTask":
                context["ecs:createaction"] = "RunTask"
                context["iam:passedtoservice"] = "ecs-tasks.amazonaws.com"
        for key, value in (call.params.get("EncryptionContext") or {}).items():
            context[f"kms:encryptioncontext:{key}".lower()] = value
        if principal:
            context["aws:principalarn"] = principal
        for key, value in (principal_tags or {}).items():
            context[f"aws:principaltag/{key}".lower()] = value
        if call.service == "sts" and call.params.get("Tags"):
            for tag in call.params["Tags"]:
                context[f"aws:requesttag/{tag['Key']}".lower()] = tag["Value"]
            context["aws:tagkeys"] = [tag["Key"] for tag in call.params["Tags"]]
        return context

    # Resource tags, as the emulator stores them: read only when a statement's condition names
    # aws:ResourceTag (the target actions of a role session), with unchecked calls.
    def _resource_tags(self, call: _Call, resource: str, statements: list[Statement]) -> dict[str, str]:
        if not any(s.names_resource_tags for s in statements):
            return {}
        token = _internal.set(True)
        try:
            tags = self._read_tags(call.service, resource, call.params)
        except ClientError:
            tags = {}  # a resource that does not exist has no tags: the condition does not hold
        finally:
            _internal.reset(token)
        return {f"aws:resourcetag/{k}".lower(): v for k, v in tags.items()}

    def _tag_client(self, service: str):
        if service not in self._tag_clients:
            import boto3

            self._tag_clients[service] = boto3.session.Session().client(service, region_name=self.region)
        return self._tag_clients[service]

    def _read_tags(self, service: str, resource: str, params: dict) -> dict[str, str]:
        client = self._tag_client(service)
        if service == "ecs":  # a task definition's or a task's (strict_ecs.py: as ECS keeps them)
            return strict_ecs.tags_of(client, resource)
        if service == "sqs":
            return client.list_queue_tags(QueueUrl=params["QueueUrl"]).get("Tags") or {}
        if service == "sns":
            return {t["Key"]: t["Value"] for t in client.list_tags_for_resource(ResourceArn=resource).get("Tags", [])}
        if service == "events":
            return {t["Key"]: t["Value"] for t in client.list_tags_for_resource(ResourceARN=resource).get("Tags", [])}
        if service == "kms":  # a key's tags (sse_kms: the targets role's keys are granted by tag)
            return {t["TagKey"]: t["TagValue"] for t in client.list_resource_tags(KeyId=resource).get("Tags", [])}
        if service == "lambda":
            unqualified = ":".join(resource.split(":")[:7])  # tags are the function's, not an alias's
            return client.list_tags(Resource=unqualified).get("Tags") or {}
        return {}

    def _resources_of(self, call: _Call) -> list[str]:
        p, service = call.params, call.service
        if service == "dynamodb":
            tables = list(p.get("RequestItems", {})) or [t for item in p.get("TransactItems", [])
                                                         for t in [next(iter(item.values()))["TableName"]]]
            if "TableName" in p:
                tables = [p["TableName"]]
            arns = [self._table_arn(t) for t in dict.fromkeys(tables)]
            if p.get("IndexName"):
                arns = [f"{arns[0]}/index/{p['IndexName']}"]
            return arns or ["*"]
        if service == "sqs":
            if "QueueUrl" in p:
                return [_queue_arn(p["QueueUrl"])]
            if "QueueName" in p:
                return [f"arn:aws:sqs:{REGION}:{p.get('QueueOwnerAWSAccountId') or ACCOUNT}:{p['QueueName']}"]
        if service == "sns":
            return [p.get("TopicArn") or p.get("TargetArn") or "*"]
        if service == "events" and call.operation == "PutEvents":
            buses = {e.get("EventBusName") or "default" for e in p.get("Entries", [])}
            return [b if b.startswith("arn:") else f"arn:aws:events:{REGION}:{ACCOUNT}:event-bus/{b}" for b in buses]
        if service == "lambda" and "FunctionName" in p:
            name = p["FunctionName"]
            if name.startswith("arn:"):
                return [name]
            return [f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"]
        if service == "ecs":
            cluster = _cluster_name(p)
            if call.operation == "ListTasks":  # IAM names the container instances of the cluster
                return [f"arn:aws:ecs:{REGION}:{ACCOUNT}:container-instance/{cluster}/*"]
            tasks = p.get("tasks") or ([p["task"]] if p.get("task") else [])
            if tasks:
                return [t if t.startswith("arn:") else f"arn:aws:ecs:{REGION}:{ACCOUNT}:task/{cluster}/{t}"
                        for t in tasks]
        if service == "kms":
            key = p.get("KeyId")
            if key is None and "CiphertextBlob" in p:
                key = _moto_ciphertext_key(p["CiphertextBlob"])
                key = self._kms_ids.get(key, key)
            if key is None:
                return ["*"]
            if key.startswith("arn:"):
                return [key]
            if key.startswith("alias/"):
                return [f"arn:aws:kms:{REGION}:{ACCOUNT}:{key}"]
            return [f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{key}"]
        return ["*"]

    @staticmethod
    def _table_arn(name: str) -> str:
        return name if name.startswith("arn:") else f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}"
