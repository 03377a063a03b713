"""Tenant API keys, managed in the ApiKeys table with AWS credentials (or the local emulator)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from jobsched.domain.tenant_tags import is_taggable
from jobsched.domain.clock import SystemClock
from jobsched.domain.schedule import format_instant
from jobsched.service.auth import ApiKeys
from jobsched.store.api_keys import ApiKeysStore
LOCAL_EMULATOR = "http://127.0.0.1:8090"
# `make run` writes its emulator's address here (under JOBSCHED_WORKDIR), whatever port it was given.
EMULATOR_URL_FILE = "emulator.url"


def local_emulator_url() -> str:
    """Where the local stack's emulator listens: JOBSCHED_EMULATOR_URL, else JOBSCHED_EMULATOR_PORT,
    else what the running `make run` wrote in its work directory, else the default port."""
    if os.environ.get("JOBSCHED_EMULATOR_URL"):
        return os.environ["JOBSCHED_EMULATOR_URL"]
    if os.environ.get("JOBSCHED_EMULATOR_PORT"):
        return f"http://127.0.0.1:{os.environ['JOBSCHED_EMULATOR_PORT']}"
    written = _local_workdir() / EMULATOR_URL_FILE
    try:
        return written.read_text().strip() or LOCAL_EMULATOR
    except OSError:
        return LOCAL_EMULATOR


def _local_workdir() -> Path:
    return Path(os.environ.get("JOBSCHED_WORKDIR", ".build/local"))


def local_session():
    """A session signed with the running local stack's own credentials (its emulator takes no
    other), read from its work directory (readable by the stack's user only)."""
    from jobsched.local.emulator_auth import CREDENTIALS_FILE, StackCredentials

    try:
        return StackCredentials.read(_local_workdir()).session()
    except (OSError, ValueError, KeyError) as exc:
        raise KeyAdminError(f"cannot read the local stack's credentials in {_local_workdir() / CREDENTIALS_FILE} "
                            f"({exc}); is `make run` running with this JOBSCHED_WORKDIR, as this user?") from exc
API_KEYS_LOGICAL_PREFIX = "StorageApiKeys"


class KeyAdminError(RuntimeError):
    pass


def stack_table(local: bool, endpoint_url: str | None, stack: str, logical_prefix: str,
                table: str | None) -> tuple:
    """(session, endpoint, table name): AWS credentials (or the local stack's own, `local`), and
    the stack's table whose logical id starts with `logical_prefix` unless `table` names it."""
    import boto3

    if local:
        endpoint_url = endpoint_url or local_emulator_url()
        # The stack's own credentials: never real ones, and the emulator takes no others.
        session = local_session()
    else:
        session = boto3.session.Session()
    if table is None:
        cfn = session.client("cloudformation", endpoint_url=endpoint_url)
        resources = cfn.describe_stack_resources(StackName=stack)["StackResources"]
        table = next((r["PhysicalResourceId"] for r in resources
                      if r["LogicalResourceId"].startswith(logical_prefix)
                      and r["ResourceType"] == "AWS::DynamoDB::Table"), None)
        if table is None:
            raise KeyAdminError(f"stack {stack} has no {logical_prefix.removeprefix('Storage')} table")
    return session, endpoint_url, table


@dataclass
class KeyAdmin:
    store: ApiKeysStore
    local_ecs: object = None  # the local stack's ECS (--local): a new tenant gets its task definition

    @classmethod
    def connect(cls, local: bool = False, endpoint_url: str | None = None, table: str | None = None,
                stack: str = "Jobsched") -> "KeyAdmin":
        session, endpoint_url, table = stack_table(local, endpoint_url, stack, API_KEYS_LOGICAL_PREFIX, table)
        return cls(ApiKeysStore(session.resource("dynamodb", endpoint_url=endpoint_url), table),
                   session.client("ecs", endpoint_url=endpoint_url) if local else None)

    def grant_local_container_tasks(self, tenant_id: str) -> list[str]:
        """With --local: the tenant's task definition for container jobs, as `make run` registers
        one for the tenants it starts with (local/tasks.py). Returns the lines that name it."""
        if self.local_ecs is None:
            return []
        from jobsched.local.tasks import register_tenant_definitions

        arn = register_tenant_definitions(self.local_ecs, [tenant_id])[tenant_id]
        return [f"container jobs: taskDefinition {arn}"]

    def create(self, tenant_id: str) -> tuple[str, str]:
        if not tenant_id.strip():
            raise KeyAdminError("a tenant id is required")
        if not is_taggable(tenant_id):
            # The worker calls AWS targets in a session tagged with the tenant id (store/targets.py).
            raise KeyAdminError("a tenant id is at most 256 letters, digits, spaces and _ . : / = + - @ "
                                "(it is the session tag that grants the tenant its AWS targets)")
        return ApiKeys(self.store, SystemClock()).issue(tenant_id)

    def list(self, tenant_id: str | None) -> list[dict]:
        return [{"keyId": k["keyId"], "tenantId": k["tenantId"], "created": format_instant(k["createdMs"]),
                 "revoked": format_instant(k["revoked"]) if k.get("revoked") else None}
                for k in self.store.list_keys(tenant_id)]

    def revoke(self, key_id: str) -> dict | None:
        revoked = self.store.revoke(key_id, SystemClock().now_ms())
        if revoked is None:
            return None
        return {"keyId": key_id, "tenantId": revoked["tenantId"]}
