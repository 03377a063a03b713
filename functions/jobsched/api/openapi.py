"""The OpenAPI 3.1 document of the API, generated from the route table and the models."""
from __future__ import annotations

import re
from functools import lru_cache

from pydantic import BaseModel

from jobsched.api import schemas
from jobsched.api.routes import PATH_SCHEMAS, ROUTES, Route

ERROR_TEXT = {400: "Malformed request", 401: "No or bad API key", 404: "Not found (or another tenant's)",
              409: "State conflict or version mismatch", 413: "Payload over 256 KB",
              422: "Well-formed but invalid (bad cron, unknown time zone, ...)",
              429: "Tenant quota exceeded (active jobs, creates per second)"}
# 503, with Retry-After: every route that reads or writes the tables may be over a rate (THROTTLED);
# in a multi-region deployment a change is decided by the region that holds its job: a change that
# lands elsewhere is forwarded there and answered with that region's answer (any status above),
# and one that no region can take now is REGION_UNAVAILABLE (handlers/api.py holder_elsewhere).
THROTTLED_TEXT = "THROTTLED: over a rate for this tenant; retry after Retry-After seconds"
REGION_TEXT = ("; or, with regions, REGION_UNAVAILABLE: no region can take this change now (its job's segment "
               "is moving between regions, or the region that holds it did not answer). A change that lands in "
               "a region that does not hold its job is forwarded to the one that does and answered with that "
               "region's answer")
# The routes that change a job, create one or act on several in a multi-region deployment.
REGION_ROUTES = frozenset({"create_job", "create_jobs", "bulk_jobs"})
RETRY_AFTER = {"Retry-After": {"description": "seconds to wait before retrying", "schema": {"type": "integer"}}}


@lru_cache(maxsize=1)
def openapi_document() -> dict:
    components: dict[str, dict] = {}

    def ref(model: type[BaseModel]) -> dict:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, definition in schema.pop("$defs", {}).items():
            components.setdefault(name, definition)
        components[model.__name__] = schema
        return {"$ref": f"#/components/schemas/{model.__name__}"}

    error_ref = ref(schemas.Error)
    paths: dict[str, dict] = {}
    for route in ROUTES:
        paths.setdefault(route.path, {})[route.method.lower()] = _operation(route, ref, error_ref)
    return {
        "openapi": "3.1.0",
        "info": {"title": "jobsched", "version": "1",
                 "description": "A serverless distributed job scheduler. Authenticate with `Authorization: Bearer <api key>`."},
        "paths": paths,
        "components": {"schemas": components,
                       "securitySchemes": {"apiKey": {"type": "http", "scheme": "bearer"}}},
    }


def _operation(route: Route, ref, error_ref: dict) -> dict:
    operation: dict = {"operationId": route.name, "summary": route.summary}
    parameters = [{"name": name, "in": "path", "required": True,
                   "schema": PATH_SCHEMAS.get(name, {"type": "string", "minLength": 1})}
                  for name in re.findall(r"{(\w+)}", route.path)]
    parameters += [{"name": p.name, "in": p.where, "required": p.required, "description": p.description,
                    "schema": {"type": p.type, **dict(p.schema)}} for p in route.params]
    if parameters:
        operation["parameters"] = parameters
    if route.request is not None:
        operation["requestBody"] = {"required": route.body_required,
                                    "content": {"application/json": {"schema": ref(route.request)}}}
    ok: dict = {"description": route.summary}
    if route.response is not None:
        ok["content"] = {"application/json": {"schema": ref(route.response)}}
    operation["responses"] = {str(route.status): ok, **{
        str(code): {"description": ERROR_TEXT[code], "content": {"application/json": {"schema": error_ref}}}
        for code in route.errors}}
    unavailable = _unavailable(route)
    if unavailable is not None:
        operation["responses"]["503"] = {"description": unavailable, "headers": RETRY_AFTER,
                                         "content": {"application/json": {"schema": error_ref}}}
    elif route.name == "health":  # its own body, status "degraded": a DNS health check's answer
        operation["responses"]["503"] = {**ok, "description": "This region holds no segment (regions)"}
    operation["security"] = [{"apiKey": []}] if route.auth else []
    return operation


def _unavailable(route: Route) -> str | None:
    """What a 503 of this route means (None: it answers none in the error envelope)."""
    if route.name in ("openapi", "health"):
        return None
    changes_a_job = route.method != "GET" and ("{jobId}" in route.path or "{executionId}" in route.path)
    return THROTTLED_TEXT + (REGION_TEXT if changes_a_job or route.name in REGION_ROUTES else "")
