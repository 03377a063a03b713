"""The OpenAPI document declares the 503s the API answers: THROTTLED on every route that reads or
writes the tables, REGION_UNAVAILABLE (and forwarding) on every change a multi-region deployment
decides in the region that holds the job, each with Retry-After; health's own 503 (degraded)."""
from jobsched.api.openapi import openapi_document
from jobsched.api.routes import ROUTES

ERROR = {"$ref": "#/components/schemas/Error"}


def operation(route):
    return openapi_document()["paths"][route.path][route.method.lower()]


def test_every_change_a_region_forwards_or_refuses_declares_its_503_with_retry_after():
    forwarded = [r for r in ROUTES if r.method != "GET" and ("{jobId}" in r.path or "{executionId}" in r.path)]
    assert {r.name for r in forwarded} >= {"pause_job", "cancel_job", "heartbeat_execution", "trigger_job"}
    for route in forwarded + [r for r in ROUTES if r.name in ("create_job", "create_jobs", "bulk_jobs")]:
        answer = operation(route)["responses"]["503"]
        assert "REGION_UNAVAILABLE" in answer["description"] and "forwarded" in answer["description"], route.name
        assert answer["content"]["application/json"]["schema"] == ERROR
        assert "Retry-After" in answer["headers"]


def test_reads_declare_throttled_and_health_its_degraded_body():
    for route in ROUTES:
        if route.name in ("openapi", "health"):
            continue
        answer = operation(route)["responses"]["503"]
        assert "THROTTLED" in answer["description"], route.name
        if route.method == "GET":
            assert "REGION_UNAVAILABLE" not in answer["description"], route.name
    health = operation(next(r for r in ROUTES if r.name == "health"))["responses"]
    assert health["503"]["content"] == health["200"]["content"]  # status "degraded", the same schema
