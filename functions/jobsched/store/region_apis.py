"""Another region's API, called by this region's API function (docs/architecture.md, "Requests in
any region"): a change to a job or an execution that this region does not schedule now is handed,
as the same API Gateway event, to the API function of the region that does, and its answer is
this request's answer.

The call is Lambda's Invoke (RequestResponse) of that region's API function, named
REGION_API_FUNCTION with `{region}` replaced (infra: `Jobsched-<region>-api`), in that region's
endpoint. One attempt, no retry: a change is not made twice by our retry (the client retries with
its Idempotency-Key, or a target with its next heartbeat). Request and answer each at most 6 MB
(Lambda's synchronous payload), far above what the API takes or answers (its bodies and pages)."""
from __future__ import annotations

import json

import boto3
from botocore.config import Config

from jobsched.store.aws import USER_AGENT

# The holder's answer within its own 20 s function timeout is not waited for to the end: this
# function has 20 s too. A holder that does not answer in 12 s is taken as unavailable (503, retry).
_CONFIG = Config(retries={"mode": "standard", "total_max_attempts": 1}, connect_timeout=1, read_timeout=12,
                 parameter_validation=False, user_agent=USER_AGENT)
# Set on the forwarded event: the region that forwarded it. Its receiver never forwards it again
# (a lease that moved meanwhile answers 503, retry), so a request crosses at most one region.
FORWARDED_BY = "X-Jobsched-Forwarded-By"


class RegionUnreachable(Exception):
    """The other region's API did not answer (its endpoint, its function, or its time ran out)."""


class RegionApis:
    def __init__(self, session: boto3.session.Session | None, function_pattern: str, this_region: str) -> None:
        self._session = session or boto3.session.Session()
        self._pattern = function_pattern
        self._this = this_region
        self._clients: dict[str, object] = {}

    @property
    def configured(self) -> bool:
        return "{region}" in self._pattern

    def call(self, region: str, event: dict) -> dict:
        """The API Gateway answer (statusCode, headers, body) of `region`'s API function to `event`."""
        client = self._clients.get(region)
        if client is None:
            client = self._clients[region] = self._session.client("lambda", region_name=region, config=_CONFIG)
        forwarded = forwarded_event(event, self._this)
        try:
            answer = client.invoke(FunctionName=self._pattern.replace("{region}", region),
                                   InvocationType="RequestResponse", Payload=json.dumps(forwarded).encode())
            payload = json.loads(answer["Payload"].read() or b"null")
        except Exception as exc:  # noqa: BLE001 - any failure to get an answer: unavailable
            raise RegionUnreachable(f"{region}: {type(exc).__name__}") from exc
        if answer.get("FunctionError") or not isinstance(payload, dict) or "statusCode" not in payload:
            raise RegionUnreachable(f"{region}: the function failed ({answer.get('FunctionError')})")
        return payload


def forwarded_event(event: dict, by_region: str) -> dict:
    """`event` marked as forwarded by `by_region` (both header maps of API Gateway's proxy event)."""
    forwarded = dict(event)
    forwarded["headers"] = {**(event.get("headers") or {}), FORWARDED_BY: by_region}
    if event.get("multiValueHeaders") is not None:
        forwarded["multiValueHeaders"] = {**event["multiValueHeaders"], FORWARDED_BY: [by_region]}
    return forwarded


def job_change_event(event: dict, method: str, path: str, body: dict | None) -> dict:
    """`event` (API Gateway's proxy event, payload 1.0, of either API type) made into the request
    `method path` with `body`, with the same key and authorizer context: a bulk action's change of
    one job, sent to the region that holds the job (handlers/api.py)."""
    changed = dict(event)
    context = dict(event.get("requestContext") or {})
    old_path, stage_path = event.get("path") or "", context.get("path") or ""
    stage = stage_path[:len(stage_path) - len(old_path)] if old_path and stage_path.endswith(old_path) else ""
    context.update(httpMethod=method, path=stage + path)
    changed.update(path=path, httpMethod=method, requestContext=context, isBase64Encoded=False,
                   body=json.dumps(body) if body is not None else None,
                   queryStringParameters=None, multiValueQueryStringParameters=None)
    if (event.get("pathParameters") or {}).get("proxy") is not None:  # the REST API's {proxy+}
        changed["pathParameters"] = {"proxy": path.lstrip("/")}
    for name in ("headers", "multiValueHeaders"):  # the new body's length is not the old one's
        if event.get(name) is not None:
            changed[name] = {k: v for k, v in event[name].items() if k.lower() != "content-length"}
    return changed
