"""The layer: StrictAws, whose botocore entry points (`before`, `after`) run each call's IAM check,
its service's checks and its bill. Each concern is a mixin of its own module."""
from __future__ import annotations

import json
import time
from typing import Any, Callable

from jobsched.local import strict_ecs
from jobsched.local.strict_aws import sse_kms
from jobsched.local.strict_aws.authorize import Authorization
from jobsched.local.strict_aws.base import (REGION, StrictLayerError, _Call, _access_key, _error, _internal,
    current_function)
from jobsched.local.strict_aws.capacity import Ledger, Limits, Report
from jobsched.local.strict_aws.dynamodb import DynamoDbChecks
from jobsched.local.strict_aws.dynamodb_billing import DynamoDbBilling
from jobsched.local.strict_aws.ecs import EcsChecks
from jobsched.local.strict_aws.iam import _parsed, _TablesOnly
from jobsched.local.strict_aws.kms import KmsChecks
from jobsched.local.strict_aws.sqs import InFlight, Messaging
from jobsched.local.strict_aws.sts import RoleSession, RoleSessions


class StrictAws(Authorization, RoleSessions, DynamoDbChecks, DynamoDbBilling, Messaging, KmsChecks,
                EcsChecks):
    def __init__(self, template: dict, physical_ids: dict[str, str], now_ms: Callable[[], int] | None = None,
                 limits: Limits | None = None, region: str = REGION) -> None:
        # The emulator's region whose backend holds this stack (a simulated region of its own,
        # local/regions.py): the items the layer bills are read there. ARNs keep REGION's name in the
        # template's policies and in the calls alike, so IAM decides the same in every region.
        self.region = region
        self.template = _parsed(json.dumps(template, sort_keys=True), json.dumps(physical_ids, sort_keys=True))
        self.now_ms = now_ms or (lambda: int(time.time() * 1000))
        self.limits = limits or Limits()
        self.ledger = Ledger()
        self._raw_client = None
        self._kms_ids: dict[str, str] = {}  # a key id a ciphertext names -> the key's id now
        self._peek_fn: Callable[[str, dict], dict | None] | None = None
        self._reports = False  # use_reports
        self._sessions: dict[str, RoleSession] = {}  # access key id → the role session it signs as
        self._tag_clients: dict[str, Any] = {}
        self.in_flight = InFlight()
        self._raw_sqs = None
        self._queue_attributes = True  # a send is held to its queue's own MaximumMessageSize
        # (caller, queue or topic) -> until when SQS reuses the data key it got for them (SSE-KMS).
        self._sse_reuse: dict[tuple[str | None, str], int] | None = {}

    @classmethod
    def billing_only(cls, tables: dict[str, tuple[str, ...]], now_ms: Callable[[], int] | None = None,
                     peek: Callable[[str, dict], dict | None] | None = None,
                     region: str = REGION, queue_attributes: bool = False) -> "StrictAws":
        """Bills capacity per key and refuses what AWS refuses by size, but checks no IAM and
        throttles nothing: for benchmarks whose AWS is answered in-process (bench/instant_aws.py,
        no template, and a clock that stands still over a whole hand-off, so that the ledger's
        "second" is the whole run). `tables`: name → (partition key, sort key); `peek` gives the
        item before a write (none: billed on the item written); `queue_attributes`: read each
        queue's MaximumMessageSize (else SQS's 1 MiB: a queue answered in-process has none to read)."""
        layer = cls.__new__(cls)
        layer.region = region
        layer.template = _TablesOnly({name: {"": (keys[0], keys[1] if len(keys) > 1 else None)}
                                      for name, keys in tables.items()})
        layer.now_ms = now_ms or (lambda: int(time.time() * 1000))
        unlimited = 10 ** 15
        layer.limits = Limits(partition_wcu=unlimited, partition_rcu=unlimited, kms_per_second=unlimited)
        layer.ledger = Ledger()
        layer._raw_client = None
        layer._peek_fn = peek or (lambda table, key: None)
        layer._reports = False
        layer._sessions = {}
        layer._tag_clients = {}
        layer.in_flight = InFlight()
        layer._raw_sqs = None
        layer._sse_reuse = None  # answered in-process: no queue or topic attributes to read
        layer._queue_attributes = queue_attributes
        return layer

    # --- entry points from botocore's events ---------------------------------------------------

    def before(self, client, model, params: dict, context: dict) -> None:
        if _internal.get():
            return
        service = model.service_model.signing_name or model.service_model.endpoint_prefix
        call = _Call(service, model.name, params, self.now_ms() // 1000)
        function = current_function.get()
        session = self._sessions.get(_access_key(client) or "")
        caller = None  # (who, their statements, principal ARN, principal tags): None for an unchecked call
        if session is not None:
            # Signed with a role session's credentials (AssumeRole): that role decides, whoever calls.
            if self.now_ms() >= session.expires_ms:
                code = "ExpiredToken" if service in ("sqs", "sns", "sts") else "ExpiredTokenException"
                raise _error(client, call.operation, code, "The security token included in the request is expired",
                             403 if service in ("sqs", "sns") else 400)
            caller = (session.label, self.template.role_policies.get(session.role, []), session.principal_arn,
                      session.tags)
        elif function is not None:
            statements = self.template.policies.get(function)
            if statements is None:
                raise StrictLayerError(f"no function {function!r} in the template")
            caller = (function, statements, self.template.function_role.get(function), None)
        if caller is not None:
            self._authorize(client, caller[0], caller[1], call, principal=caller[2], principal_tags=caller[3])
        check = getattr(self, f"_check_{service}", None)
        if check:
            check(client, call)
        if (service, call.operation) in sse_kms.SSE_SENDS and self._sse_reuse is not None:
            self._check_sse_kms(client, call, caller)
        context["strict_aws"] = call

    def after(self, client, http_response, parsed: dict, model, context: dict) -> None:
        call = context.get("strict_aws")
        if call is None or _internal.get():
            return
        if call.service == "sts" and call.operation == "AssumeRole" and http_response.status_code < 300:
            self._remember_session(call, parsed)
        if call.service == "ecs" and http_response.status_code < 300:  # tasks' tags as ECS keeps them
            strict_ecs.after_call(self._tag_client("ecs"), call.operation, call.params, parsed, _internal)
        if self._reports and call.service == "dynamodb":
            self._take_report(call, http_response)
        bill = getattr(self, f"_bill_{call.service}", None)
        if bill:
            bill(client, call, parsed, http_response.status_code < 300)

    def report(self) -> Report:
        hottest = sorted(self.ledger.partitions.items(),
                         key=lambda kv: max(kv[1].peak_wcu / self.limits.partition_wcu,
                                            kv[1].peak_rcu / self.limits.partition_rcu), reverse=True)
        return Report(hottest, self.ledger.kms_peak, self.ledger.kms_total,
                      sum(u.throttled for u in self.ledger.partitions.values()), list(self.ledger.denied),
                      self.ledger.assumed_roles)
