"""API function: the public HTTP API behind API Gateway (REST, proxy integration)."""
from __future__ import annotations

from typing import Any, Mapping

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.metrics import MetricUnit

from jobsched.api.mapping import execution_to_json, job_to_json
from jobsched.api.models import JobRequest, parse_body
from jobsched.domain.errors import (
    Conflict,
    DomainError,
    FieldProblem,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    Unauthorized,
    UnprocessableRequest,
)
from jobsched.handlers.wiring import build, lazy, metrics_for
from jobsched.service.auth import Authenticator
from jobsched.service.jobs import JobsService

logger = Logger(service="jobsched-api")

HTTP_STATUS = {
    InvalidRequest: 400,
    Unauthorized: 401,
    NotFound: 404,
    Conflict: 409,
    PayloadTooLarge: 413,
    UnprocessableRequest: 422,
}


def error_response(status: int, code: str, message: str, details: list[FieldProblem] | None = None) -> Response:
    body = {"error": {"code": code, "message": message,
                      "details": [{"field": d.field, "message": d.message} for d in details or []]}}
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=body)


def _limit(value: str | None) -> int:
    if value is None:
        return 20
    if not value.isdigit() or not 1 <= int(value) <= 100:
        raise InvalidRequest("limit: must be an integer from 1 to 100", [FieldProblem("limit", "1..100")])
    return int(value)


def make_handler(env: Mapping[str, str], clock=None, session=None):
    parts = build(env, "api", clock, session)
    metrics = metrics_for(env, "jobsched-api")
    service = JobsService(parts.stores, parts.handoff, parts.clock)
    auth = Authenticator(parts.stores.api_keys, parts.clock)
    app = APIGatewayRestResolver()

    def tenant() -> str:
        tenant_id = auth.tenant_for(app.current_event.headers.get("Authorization"))
        logger.append_keys(tenantId=tenant_id)
        return tenant_id

    def json_response(status: int, body: Any) -> Response:
        return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=body)

    @app.get("/v1/health")
    def health():
        return json_response(200, {"status": "ok"})

    @app.post("/v1/jobs")
    def create_job():
        tenant_id = tenant()
        request = parse_body(JobRequest, app.current_event.decoded_body)
        job = service.create(tenant_id, request)
        logger.info("job created", extra={"jobId": job.job_id, "type": job.spec.schedule.type.value})
        metrics.add_metric(name="JobsCreated", unit=MetricUnit.Count, value=1)
        return json_response(201, job_to_json(job, parts.clock.now_ms()))

    @app.get("/v1/jobs/<jobId>")
    def get_job(jobId: str):  # noqa: N803 (path parameter name from the API contract)
        job = service.get(tenant(), jobId)
        return json_response(200, job_to_json(job, parts.clock.now_ms()))

    @app.get("/v1/jobs/<jobId>/executions")
    def list_executions(jobId: str):  # noqa: N803
        tenant_id = tenant()
        query = app.current_event.query_string_parameters or {}
        page = service.executions(tenant_id, jobId, _limit(query.get("limit")), query.get("cursor"))
        return json_response(200, {"items": [execution_to_json(e) for e in page.items], "nextCursor": page.next_cursor})

    @app.get("/v1/executions/<executionId>")
    def get_execution(executionId: str):  # noqa: N803
        execution = service.execution(tenant(), executionId)
        return json_response(200, execution_to_json(execution))

    @app.exception_handler(DomainError)
    def domain_error(exc: DomainError):
        status = next((s for cls, s in HTTP_STATUS.items() if isinstance(exc, cls)), 400)
        return error_response(status, exc.code, exc.message, exc.details)

    @app.not_found
    def not_found(_exc):
        return error_response(404, "NOT_FOUND", f"no route {app.current_event.http_method} {app.current_event.path}")

    @metrics.log_metrics
    @logger.inject_lambda_context(clear_state=True)
    def handler(event, context):
        response = app.resolve(event, context)
        status = int(response.get("statusCode", 500))
        metrics.add_metric(name="ApiRequests", unit=MetricUnit.Count, value=1)
        if status >= 500:
            metrics.add_metric(name="Api5xx", unit=MetricUnit.Count, value=1)
        elif status >= 400:
            metrics.add_metric(name="Api4xx", unit=MetricUnit.Count, value=1)
        return response

    return handler


handler = lazy(make_handler)
