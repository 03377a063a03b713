"""API function: the public HTTP API behind API Gateway (REST, proxy integration)."""
from __future__ import annotations

import binascii
import json
import os
from typing import Any, Mapping

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent
from aws_lambda_powertools.metrics import MetricUnit

from jobsched.domain.executions import job_id_of
from jobsched.domain.ownership import home_index
from jobsched.api.answers import calendar_to_json, execution_to_json, job_to_json, preview_excluding, preview_schedule
from jobsched.api.answers import occurrence_to_json  # the occurrence ledger
from jobsched.api.mapping import OwnResources, TargetScope, check_task_networks, to_spec
from jobsched.api.mapping import preview_catch_up  # catch-up that does not flood
from jobsched.domain.calendars import checked_job_calendars
from jobsched.service.calendars import CalendarCache, CalendarsService
from jobsched.domain.endpoints import OwnEndpoints
from jobsched.api.models import (
    MAX_BATCH_BODY_BYTES,
    BackfillRequest,
    BatchEnvelope,
    BatchJobRequest,
    BulkRequest,
    CalendarRequest,
    CompleteRequest,
    FailRequest,
    HeartbeatRequest,
    JobRequest,
    PauseRequest,
    RotateSigningSecretRequest,
    check_report_size,
    parse_body,
    parse_data,
)
from jobsched.api.http_boundary import (INTERNAL_MESSAGE, MAX_ID_BYTES, MAX_PAGE_BYTES,
                                        MAX_QUERY_CHARS, _bounded_int_param, _idempotency_key, _int_param,
                                        _limit, _state, _tag, error_body, error_response, http_status)
from jobsched.api.openapi import openapi_document
from jobsched.api.routes import ROUTES
from jobsched.domain.stats import WINDOWS_MS
from jobsched.domain.jobs import JobSpec
from jobsched.domain.schedule import format_instant, parse_instant
from jobsched.domain.errors import DomainError, FieldProblem, InvalidRequest, NotFound, PayloadTooLarge, Unauthorized
from jobsched import console
from jobsched.handlers.authorizer import TENANT_CONTEXT_KEY
from jobsched.handlers.wiring import build, lazy, metrics_for
from jobsched.service.auth import Authenticator
from jobsched.service.callbacks import Callbacks
from jobsched.service.creation import NewJob, batch_job_key
from jobsched.service.jobs import JobsService, Quotas, body_hash
from jobsched.service.outcomes import Outcomes
from jobsched.service.signing import SigningSecrets
from jobsched.store.aws import is_throttle
from jobsched.handlers.forwarding import Forwarding
from jobsched.store.region_apis import RegionApis

logger = Logger(service="jobsched-api")


class OwnEventResolver(APIGatewayRestResolver):
    """The request it resolves kept on itself. Powertools keeps it on its base class
    (BaseRouter.current_event), which every resolver of the process shares: right in Lambda, where
    a process answers one request at a time, but the local stack runs the API's containers as
    threads of one process, and there a request read another's headers (its Authorization, its
    Idempotency-Key) when two were answered at once."""

    def resolve(self, event, context):
        if isinstance(event, BaseProxyEvent):
            event = event.raw_event
        self.current_event = self._to_proxy_event(event)
        self.lambda_context = context
        return super().resolve(event, context)

def authorized_tenant(event: dict) -> str | None:
    """The tenant the API's Lambda authorizer answered for this request (handlers/authorizer.py):
    in requestContext.authorizer (payload 1.0), or under its "lambda" key (2.0). None: no
    authorizer ran. Only API Gateway writes requestContext; a client's request cannot."""
    authorizer = (event.get("requestContext") or {}).get("authorizer") or {}
    context = authorizer.get("lambda") if isinstance(authorizer.get("lambda"), dict) else authorizer
    tenant_id = context.get(TENANT_CONTEXT_KEY) if isinstance(context, dict) else None
    return tenant_id if isinstance(tenant_id, str) and tenant_id else None


def make_handler(env: Mapping[str, str], clock=None, session=None):
    parts = build(env, "api", clock, session)
    metrics = metrics_for(env, "jobsched-api")
    regions = parts.settings.regions or ((parts.settings.this_region or os.environ.get("AWS_REGION", "")),)
    own = OwnResources(f"{parts.settings.stack_name}-" if parts.settings.stack_name else "",
                       frozenset(url for _, url in parts.settings.lane_urls),
                       OwnEndpoints.parse(parts.settings.own_endpoints),
                       TargetScope(parts.settings.target_account, parts.settings.target_arn_patterns,
                                   parts.settings.ecs_task_definitions, parts.settings.ecs_clusters, regions),
                       parts.settings.allow_private_targets)
    service = JobsService(parts.stores, parts.handoff, parts.clock,
                          Quotas(parts.settings.max_active_jobs, parts.settings.max_creates_per_second))
    callbacks = Callbacks(parts.stores, Outcomes(parts.stores, parts.handoff, parts.clock), parts.clock)
    auth = Authenticator(parts.stores.api_keys, parts.clock)
    signing = SigningSecrets(parts.stores.signing, parts.clock)
    calendars = CalendarsService(parts.stores, parts.clock)
    region_apis = RegionApis(session, parts.settings.region_api_function, parts.settings.this_region)
    app = OwnEventResolver()

    def tenant() -> str:
        # Behind the authorizer (every route that needs a key, on AWS and in the local stack), API
        # Gateway hands over the tenant it answered; a request that came another way is checked here.
        tenant_id = authorized_tenant(app.current_event.raw_event) or \
            auth.tenant_for(app.current_event.headers.get("Authorization"))
        logger.thread_safe_append_keys(tenantId=tenant_id)  # this request's lines alone (OwnEventResolver)
        return tenant_id

    def query(name: str) -> str | None:
        value = (app.current_event.query_string_parameters or {}).get(name)
        if value is not None and len(value) > MAX_QUERY_CHARS:
            raise InvalidRequest(f"{name}: at most {MAX_QUERY_CHARS} characters",
                                 [FieldProblem(name, f"at most {MAX_QUERY_CHARS} characters")])
        return value

    def header(name: str) -> str | None:
        # Any case (the HTTP API may lower-case names): Powertools 3's headers ignore case.
        return app.current_event.headers.get(name)

    forwarding = Forwarding(parts, region_apis, lambda: app.current_event.raw_event, header, tenant, logger)

    def now() -> int:
        return parts.clock.now_ms()

    def ok(status: int, body: Any) -> Response:
        return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=body)

    def job_body(job, calendars: CalendarCache | None = None) -> dict:
        # Exclusion calendars: nextFireAt skips excluded instants by the hand-off's own rule; the
        # calendars a job names are read once per request (none for a job that names none).
        calendars = calendars or CalendarCache(parts.stores.calendars)
        body = job_to_json(job, now(), calendars.excludes)
        # API.md, "Regions": the job's home region (its id's mark; the only region with one region).
        body["region"] = regions[home_index(job.job_id) % len(regions)]
        return body

    def page_body(page, to_json) -> dict:
        """A page stops early (with a cursor to the rest) before its items pass MAX_PAGE_BYTES."""
        items, total = [], 0
        for item in page.items:
            body = to_json(item)
            size = len(json.dumps(body, separators=(",", ":")))
            if items and total + size > MAX_PAGE_BYTES:
                page = page.first(len(items))
                break
            items.append(body)
            total += size
        return {"items": items, "nextCursor": page.next_cursor}

    def body_text() -> str | None:
        """The request body as text: bytes that are not UTF-8 are a 400 naming the body, never
        replaced with U+FFFD and never a 500 (API Gateway hands a binary body over base64)."""
        try:
            return app.current_event.decoded_body
        except (UnicodeDecodeError, binascii.Error):
            raise InvalidRequest("the body is not valid UTF-8 text",
                                 [FieldProblem("body", "not valid UTF-8")]) from None

    def request_body() -> JobRequest:
        return parse_body(JobRequest, body_text())

    def job_spec(request: JobRequest, tenant_id: str) -> JobSpec:
        """The HTTP boundary mapped to the domain here: the use cases take a JobSpec (its container
        tasks within the tenant's networks)."""
        spec = to_spec(request, parts.clock.now_ms(), own)
        check_task_networks(spec, tenant_id, parts.settings.ecs_networks)
        return spec

    # One function per entry of api/routes.py; registered from that table below.
    def create_job():
        tenant_id = tenant()
        request = request_body()
        job, created = service.create(tenant_id, job_spec(request, tenant_id),
                                      body_hash(request.model_dump(mode="json")),
                                      _idempotency_key(header("Idempotency-Key")))
        if created:
            logger.info("job created", extra={"jobId": job.job_id, "type": job.spec.schedule.type.value})
            metrics.add_metric(name="JobsCreated", unit=MetricUnit.Count, value=1)
        return ok(201, job_body(job))

    def create_jobs():
        tenant_id = tenant()
        text = body_text()
        size = len((text or "").encode("utf-8", "surrogatepass"))
        if size > MAX_BATCH_BODY_BYTES:
            raise PayloadTooLarge(f"body: {size} bytes is over the {MAX_BATCH_BODY_BYTES} bytes a batch may be",
                                  [FieldProblem("body", f"over {MAX_BATCH_BODY_BYTES // (1024 * 1024)} MB")])
        batch = parse_body(BatchEnvelope, text)
        batch_key = _idempotency_key(header("Idempotency-Key"))
        results: list[dict | None] = [None] * len(batch.jobs)
        entries, places = [], []
        for index, data in enumerate(batch.jobs):
            try:  # each job on its own: one job's bad input never fails the others
                request = parse_data(BatchJobRequest, data, "job")
                key = request.idempotencyKey or (batch_job_key(batch_key, index) if batch_key else None)
                digest = body_hash(request.model_dump(mode="json", exclude={"idempotencyKey"}))
                entries.append(NewJob(job_spec(request, tenant_id), digest, key))
                places.append(index)
            except DomainError as exc:
                results[index] = batch_error(index, exc)
        outcomes = service.create_many(tenant_id, entries, batch_key, body_hash(batch.jobs))
        for index, outcome in zip(places, outcomes):
            if isinstance(outcome, DomainError):
                results[index] = batch_error(index, outcome)
            else:
                results[index] = {"index": index, "status": 201, "job": job_body(outcome[0])}
        made = sum(1 for outcome in outcomes if not isinstance(outcome, DomainError) and outcome[1])
        if made:
            logger.info("jobs created", extra={"count": made, "batch": len(batch.jobs)})
            metrics.add_metric(name="JobsCreated", unit=MetricUnit.Count, value=made)
        return ok(200, {"results": results})

    def batch_error(index: int, exc: DomainError) -> dict:
        status = http_status(exc)
        return {"index": index, "status": status, "error": error_body(exc.code, exc.message, exc.details)}

    def list_jobs():
        tenant_id = tenant()
        tags = [_tag(text) for text in (app.current_event.multi_value_query_string_parameters or {}).get("tag") or []]
        page = service.list(tenant_id, _state(query("state")), _limit(query("limit")), query("cursor"), tags,
                            query("namePrefix") or None)
        calendars = CalendarCache(parts.stores.calendars)
        calendars.load(page.items)  # one read for the page's calendars
        return ok(200, page_body(page, lambda job: job_body(job, calendars)))

    def bulk_jobs():
        tenant_id = tenant()
        body = parse_body(BulkRequest, body_text())
        wanted = body.filter.tag if isinstance(body.filter.tag, list) else [body.filter.tag] if body.filter.tag else []
        answer, done = service.bulk(tenant_id, body.action, [_tag(t, "filter.tag") for t in wanted],
                                    _state(body.filter.state), body.filter.namePrefix, body.dryRun, body.reason,
                                    body.bulkId, body.all,
                                    forwarding.change_elsewhere if parts.ownership.multi_region else None)
        return ok(200 if done else 202, answer)

    def backfill_job(jobId: str):  # noqa: N803
        tenant_id = tenant()
        body = parse_body(BackfillRequest, body_text())
        ids = service.backfill(tenant_id, jobId, parse_instant(body.from_, "from"), parse_instant(body.to, "to"))
        return ok(202, {"count": len(ids), "executionIds": ids})

    def get_job(jobId: str):  # noqa: N803 - path parameter names follow the API contract
        return ok(200, job_body(service.get_counted(tenant(), jobId)))

    def replace_job(jobId: str):  # noqa: N803
        tenant_id = tenant()
        job = service.replace(tenant_id, jobId, job_spec(request_body(), tenant_id),
                              _int_param(header("If-Match"), "If-Match", None))
        return ok(200, job_body(job))

    def cancel_job(jobId: str):  # noqa: N803
        return ok(200, job_body(service.cancel(tenant(), jobId)))

    def pause_job(jobId: str):  # noqa: N803
        tenant_id = tenant()
        body = parse_body(PauseRequest, body_text() or "{}")
        return ok(200, job_body(service.pause(tenant_id, jobId, body.reason)))

    def resume_job(jobId: str):  # noqa: N803
        return ok(200, job_body(service.resume(tenant(), jobId)))

    def trigger_job(jobId: str):  # noqa: N803
        tenant_id = tenant()
        return ok(202, execution_to_json(service.trigger(tenant_id, jobId, _idempotency_key(header("Idempotency-Key")))))

    def list_executions(jobId: str):  # noqa: N803
        tenant_id = tenant()
        page = service.executions(tenant_id, jobId, _limit(query("limit")), query("cursor"))
        return ok(200, page_body(page, execution_to_json))

    def job_stats(jobId: str):  # noqa: N803
        tenant_id = tenant()
        window = query("window") or "24h"
        if window not in WINDOWS_MS:
            raise InvalidRequest("window: one of 1h, 24h, 7d", [FieldProblem("window", "one of 1h, 24h, 7d")])
        stats = service.stats(tenant_id, jobId, window)
        return ok(200, {**stats, "from": format_instant(stats["from"]), "to": format_instant(stats["to"])})

    def job_occurrences(jobId: str):  # noqa: N803
        """The occurrence ledger: `to` defaults to an hour from now, `from` to a day before `to`."""
        tenant_id = tenant()
        to_text, from_text = query("to"), query("from")
        to_ms = parse_instant(to_text, "to") if to_text is not None else service.now_ms() + 3_600_000
        from_ms = parse_instant(from_text, "from") if from_text is not None else max(0, to_ms - 86_400_000)
        rows, cursor = service.occurrences(tenant_id, jobId, from_ms, to_ms, _limit(query("limit")), query("cursor"))
        return ok(200, {"items": [occurrence_to_json(r) for r in rows], "nextCursor": cursor,
                        "from": format_instant(from_ms), "to": format_instant(to_ms)})

    def with_steps(execution, run):
        """An execution's answer; a run's carries its steps (service.run_of)."""
        return execution_to_json(execution, *run) if run else execution_to_json(execution)

    def get_execution(executionId: str):  # noqa: N803
        return ok(200, with_steps(*service.execution_view(tenant(), executionId)))

    def cancel_execution(executionId: str):  # noqa: N803
        tenant_id = tenant()
        execution = service.cancel_execution(tenant_id, executionId)
        return ok(202, with_steps(execution, service.run_of(tenant_id, execution)))

    def heartbeat_execution(executionId: str):  # noqa: N803
        body = parse_body(HeartbeatRequest, body_text() or "{}")
        progress = check_report_size(body.progress, "progress")
        answer = callbacks.heartbeat(executionId, header("X-Callback-Token"), progress, ok=body.ok)
        return ok(200, {**answer, "leaseUntil": format_instant(answer["leaseUntil"])})

    def complete_execution(executionId: str):  # noqa: N803
        body = parse_body(CompleteRequest, body_text() or "{}")
        output = check_report_size(body.output, "output")
        return ok(200, execution_to_json(callbacks.complete(executionId, header("X-Callback-Token"), output)))

    def fail_execution(executionId: str):  # noqa: N803
        body = parse_body(FailRequest, body_text() or "{}")
        return ok(200, execution_to_json(callbacks.fail(executionId, header("X-Callback-Token"), body.error)))

    def list_dead_letters():
        tenant_id = tenant()
        return ok(200, page_body(service.dead_letters(tenant_id, _limit(query("limit")), query("cursor")),
                                 execution_to_json))

    def redrive_execution(executionId: str):  # noqa: N803
        tenant_id = tenant()
        execution = service.redrive(tenant_id, executionId)
        return ok(202, with_steps(execution, service.run_of(tenant_id, execution)))

    def schedule_preview():
        tenant_id = tenant()
        after = query("after")
        arguments = (
            query("type") or "CRON",
            _required_query(query("schedule"), "schedule"),
            query("timezone") or "UTC",
            _int_param(query("count"), "count", 10),
            parse_instant(after, "after") if after else parts.clock.now_ms(),
            # Schedule bounds: only fire times in [startAt, endAt), at most maxRuns of them.
            parse_instant(query("startAt"), "startAt") if query("startAt") else None,
            parse_instant(query("endAt"), "endAt") if query("endAt") else None,
            _bounded_int_param(query("maxRuns"), "maxRuns", 1, 10_000_000),
        )
        # Catch-up that does not flood: what a RUN_ALL catch-up with these bounds would do.
        catch_up = preview_catch_up(_int_param(query("maxCatchUp"), "maxCatchUp", None),
                                    _int_param(query("catchUpPerMinute"), "catchUpPerMinute", None))
        # Exclusion calendars: comma-separated or repeated names, each an existing calendar.
        given = (app.current_event.multi_value_query_string_parameters or {}).get("excludeCalendars") or []
        names = checked_job_calendars([n for text in given for n in text.split(",") if n])
        fire_times = preview_schedule(*arguments)  # the schedule's and count's own errors first
        skipped: list[dict] = []
        if names:
            fire_times, skipped = preview_excluding(*arguments, names, calendars.dates_for_preview(tenant_id, names))
        return ok(200, {"fireTimes": [format_instant(t) for t in fire_times],
                        **({"catchUp": catch_up} if catch_up else {}),
                        "skipped": [{"at": format_instant(s["at"]), "reason": s["reason"]} for s in skipped]})

    # Exclusion calendars.
    def put_calendar(name: str):
        tenant_id = tenant()
        body = parse_body(CalendarRequest, body_text())
        return ok(200, calendar_to_json(calendars.put(tenant_id, name, body.description, body.dates)))

    def list_calendars():
        tenant_id = tenant()
        return ok(200, page_body(calendars.list(tenant_id, _limit(query("limit")), query("cursor")), calendar_to_json))

    def get_calendar(name: str):
        return ok(200, calendar_to_json(calendars.get(tenant(), name)))

    def delete_calendar(name: str):
        return ok(200, calendar_to_json(calendars.delete(tenant(), name)))

    def rotate_signing_secret():
        tenant_id = tenant()
        body = parse_body(RotateSigningSecretRequest, body_text() or "{}")
        rotation = signing.rotate(tenant_id, body.graceSec)
        return ok(201, {"secret": rotation.secret, "createdAt": format_instant(rotation.created_ms),
                        "previousValidUntil": format_instant(rotation.previous_valid_until_ms)})

    def openapi():
        return ok(200, openapi_document())

    def health():
        """Public: the status alone. The region and the segments it holds are the deployment's
        layout: added only for a request with a valid key (without one, or with a bad one, a
        health check still gets its status)."""
        owned = parts.ownership.held()
        status = "ok" if owned or not parts.ownership.multi_region else "degraded"
        body: dict[str, Any] = {"status": status}
        if header("Authorization") is not None and _valid_key():
            body.update(region=parts.settings.this_region or os.environ.get("AWS_REGION", ""), ownedSegments=owned)
        return ok(200 if status == "ok" else 503, body)

    def _valid_key() -> bool:
        try:
            tenant()
        except Unauthorized:
            return False
        return True

    functions = locals()
    matched = {"route": "unmatched"}

    def named(route_name: str, function, method: str = "GET"):
        def call(**path_parameters):
            matched["route"] = route_name
            for name, value in path_parameters.items():
                if len(value.encode("utf-8", "surrogatepass")) > MAX_ID_BYTES:
                    raise NotFound(f"no such {'job' if name == 'jobId' else 'calendar' if name == 'name' else 'execution'}")
            if method != "GET" and parts.ownership.multi_region:
                holder = forwarding.holder_elsewhere(route_name, path_parameters.get("jobId")
                                                     or job_id_of(path_parameters.get("executionId") or ""))
                if holder is not None:
                    return forwarding.forward(holder)
            return function(**path_parameters)
        return call

    for route in ROUTES:
        app.route(route.resolver_path, route.method)(named(route.name, functions[route.name], route.method))

    def console_file(name: str) -> Response:
        """The web console (jobsched/console): no key to load it; it asks for one."""
        found = console.asset(name)
        if found is None:
            raise NotFound(f"no console file {name}")
        content_type, text = found
        return Response(status_code=200, content_type=content_type, body=text, headers=dict(console.HEADERS))

    app.route("/console", "GET")(named("console", lambda: console_file("index.html")))
    app.route("/console/<name>", "GET")(named("console", console_file))

    @app.exception_handler(DomainError)
    def domain_error(exc: DomainError):
        status = http_status(exc)
        return error_response(status, exc.code, exc.message, exc.details,
                              headers={"Retry-After": "1"} if status == 503 else None)

    @app.exception_handler(Exception)
    def unexpected(exc: Exception):
        if is_throttle(exc):
            # A partition, table or KMS over its rate (after botocore's own retries): the request
            # changed nothing it could not take back (each write is one conditional item write, a
            # quota place given back), so the client retries it, with its Idempotency-Key.
            logger.warning("throttled", extra={"route": matched["route"]})
            return error_response(503, "THROTTLED", "the service is over a rate for this tenant; retry shortly",
                                  headers={"Retry-After": "1"})
        # Whatever escapes a route is a 500 in the API's error shape (counted in Api5xx below),
        # never a closed connection; the details stay in the log, not in the answer.
        logger.exception("unexpected error", extra={"route": matched["route"]})
        return error_response(500, "INTERNAL", INTERNAL_MESSAGE)

    @app.not_found
    def not_found(_exc):
        return error_response(404, "NOT_FOUND", f"no route {app.current_event.http_method} {app.current_event.path}")

    @metrics.log_metrics
    @logger.inject_lambda_context(clear_state=True)
    def handler(event, context):
        # This request's keys, in the thread's own log keys: inject_lambda_context keeps the
        # request id in the logger's shared keys (OwnEventResolver).
        logger.thread_safe_clear_keys()
        logger.thread_safe_append_keys(function_request_id=getattr(context, "aws_request_id", None))
        matched["route"] = "unmatched"
        try:
            response = app.resolve(event, context)
        except Exception:  # raised outside any route (the event itself): still the error shape
            logger.exception("unexpected error outside a route")
            response = {"statusCode": 500, "headers": {"Content-Type": content_types.APPLICATION_JSON},
                        "body": json.dumps({"error": {"code": "INTERNAL", "message": INTERNAL_MESSAGE, "details": []}})}
        status = int(response.get("statusCode", 500))
        # Totals, and the same by route (one more small EMF line; routes are the table's names).
        by_route = metrics_for(env, "jobsched-api")
        by_route.add_dimension(name="route", value=matched["route"])
        for target in (metrics, by_route):
            target.add_metric(name="ApiRequests", unit=MetricUnit.Count, value=1)
            if status >= 500:
                target.add_metric(name="Api5xx", unit=MetricUnit.Count, value=1)
            elif status >= 400:
                target.add_metric(name="Api4xx", unit=MetricUnit.Count, value=1)
        by_route.flush_metrics()
        return response

    return handler


def _required_query(value: str | None, name: str) -> str:
    if not value:
        raise InvalidRequest(f"{name}: required", [FieldProblem(name, "required")])
    return value


handler = lazy(make_handler)
