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
    written = Path(os.environ.get("JOBSCHED_WORKDIR", ".build/local")) / EMULATOR_URL_FILE
    try:
        return written.read_text().strip() or LOCAL_EMULATOR
    except OSError:
        return LOCAL_EMULATOR
API_KEYS_LOGICAL_PREFIX = "StorageApiKeys"


class KeyAdminError(RuntimeError):
    pass


@dataclass
class KeyAdmin:
    store: ApiKeysStore

    @classmethod
    def connect(cls, local: bool = False, endpoint_url: str | None = None, table: str | None = None,
                stack: str = "Jobsched") -> "KeyAdmin":
        import boto3

        if local:
            endpoint_url = endpoint_url or local_emulator_url()
            # The emulator takes any credentials; never send real ones to it.
            session = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing",
                                            region_name="us-east-1")
        else:
            session = boto3.session.Session()
        if table is None:
            cfn = session.client("cloudformation", endpoint_url=endpoint_url)
            resources = cfn.describe_stack_resources(StackName=stack)["StackResources"]
            table = next((r["PhysicalResourceId"] for r in resources
                          if r["LogicalResourceId"].startswith(API_KEYS_LOGICAL_PREFIX)
                          and r["ResourceType"] == "AWS::DynamoDB::Table"), None)
            if table is None:
                raise KeyAdminError(f"stack {stack} has no ApiKeys table")
        return cls(ApiKeysStore(session.resource("dynamodb", endpoint_url=endpoint_url), table))

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
