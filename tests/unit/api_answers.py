"""Whole answers of the API (as api/schemas.py types them) for tests that script the client's
transport, and a transport that answers from a function."""
import json
from urllib.parse import parse_qsl, urlsplit

from jobsched.client import Client, Response

JOB = {"jobId": "job_1", "name": "n", "type": "RATE", "schedule": "PT5M", "timezone": "UTC", "target": {},
       "payload": None, "retryPolicy": {"maxAttempts": 3, "backoff": "EXPONENTIAL", "initialDelayMs": 1000,
                                        "maxDelayMs": 3600000},
       "timeoutSec": 300, "priority": "NORMAL", "overlapPolicy": "ALLOW", "misfirePolicy": "RUN_ONCE", "jitterSec": 0,
       "heartbeatTimeoutSec": 300, "retryOn4xx": False, "state": "ACTIVE", "nextFireAt": None,
       "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z", "version": 1, "region": "us-east-1"}
EXECUTION = {"executionId": "job_1.1", "jobId": "job_1", "scheduledAt": "2026-01-01T00:00:00Z", "status": "PENDING",
             "attempt": 0, "startedAt": None, "finishedAt": None, "durationMs": None, "lateMs": None, "attempts": [],
             "output": None, "error": None, "progress": None, "nextAttemptAt": None, "cancelRequested": False,
             "traceId": "0" * 32}


class FakeApi:
    """The CLI's client (jobsched.client) over a transport that answers from `answers(method,
    path, query)`."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []
        self.client = Client("http://api", "key", transport=self)

    def __call__(self, method, url, headers, body, timeout):
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        self.calls.append((method, parts.path, query))
        return Response(200, {}, json.dumps(self.answers(method, parts.path, query)).encode())
