"""The API's Lambda authorizer (REQUEST type): the HTTP API's (payload 2.0, simple responses) and
the REST API's (`-c api=rest`: an IAM policy as the answer).

API Gateway calls it before the API function for every route that needs a tenant's key, with the
Authorization header as its identity source, and caches its answer per header value
(infra: stack.py, API_AUTHORIZER_CACHE_SECONDS): a flood of bad keys is answered by API Gateway
and this small function (reserved concurrency of its own), never by the API function. It answers
`isAuthorized` and, for a valid key, the tenant in `context.tenantId`, which the API function
trusts (handlers/api.py, `authorized_tenant`). A request without the header never reaches it: API
Gateway answers 401 itself."""
from __future__ import annotations

from typing import Any, Mapping

from jobsched.domain.errors import Unauthorized
from jobsched.handlers.wiring import lazy
from jobsched.service.auth import Authenticator
from jobsched.settings import Settings
from jobsched.store.aws import api_keys_store

# The context key the API function reads (API Gateway passes it as requestContext.authorizer).
TENANT_CONTEXT_KEY = "tenantId"


def make_handler(env: Mapping[str, str], clock=None, session=None):
    from jobsched.domain.clock import SystemClock

    settings = Settings.from_env(env, "authorizer")
    # No positive cache of its own: API Gateway caches the answer (a second cache would keep a
    # revoked key working for both TTLs); bad keys are remembered a few seconds (service/auth.py).
    auth = Authenticator(api_keys_store(settings, session), clock or SystemClock(), ttl_ms=0)

    def handle(event: dict, context: Any) -> dict:
        try:
            tenant_id = auth.tenant_for(authorization_of(event))
        except Unauthorized:
            tenant_id = None
        if "methodArn" in event:  # the REST API's authorizer event
            return rest_answer(event["methodArn"], tenant_id)
        if tenant_id is None:
            return {"isAuthorized": False}
        return {"isAuthorized": True, "context": {TENANT_CONTEXT_KEY: tenant_id}}

    return handle


def rest_answer(method_arn: str, tenant_id: str | None) -> dict:
    """The REST API's answer: a policy that allows (a valid key) or denies (403) invoking the API.
    API Gateway caches it per Authorization header value for every method and path of the stage,
    so it names them all (`<api>/<stage>/*`), not only the method that asked; the tenant rides in
    the context (requestContext.authorizer.tenantId in the function's event)."""
    api_and_stage = "/".join(method_arn.split("/", 2)[:2])  # arn:...:execute-api:<region>:<account>:<api>/<stage>
    answer = {"principalId": tenant_id or "unknown", "policyDocument": {"Version": "2012-10-17", "Statement": [{
        "Action": "execute-api:Invoke", "Effect": "Allow" if tenant_id else "Deny",
        "Resource": f"{api_and_stage}/*"}]}}
    if tenant_id:
        answer["context"] = {TENANT_CONTEXT_KEY: tenant_id}
    return answer


def authorization_of(event: dict) -> str | None:
    """The Authorization header (payload 2.0 lower-cases header names; any case is taken)."""
    for name, value in (event.get("headers") or {}).items():
        if name.lower() == "authorization":
            return value
    return None


handler = lazy(make_handler)
