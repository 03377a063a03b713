"""jobsched's Python client: the HTTP API (API.md) as typed calls, standard library only.

    from jobsched.client import Client, JobRequest
    client = Client("http://127.0.0.1:8080", api_key="...")
    job = client.jobs.create(JobRequest(name="nightly", type="CRON", schedule="0 3 * * *",
                                        target={"type": "HTTP", "url": "https://example.com/hook"}))
    for execution in client.executions.list(job.jobId):
        print(execution.status)

Shaped after the clients people already know, and where each shape comes from:

- Stripe's Python SDK (`StripeClient`): resources as attributes of one client
  (`client.jobs.create`, as `client.customers.create`); an Idempotency-Key made for every create
  and reused by each retry of that call, overridable per call; retries bounded, with jitter,
  that honour the server's Retry-After; an exception class per kind of error
  (InvalidRequestError, NotFoundError, ConflictError, RateLimitError, ...) carrying the API's
  envelope: `status`, `code`, `message` and, per field, `details` / `fields`; list calls that
  page on their own when iterated (its `auto_paging_iter`).
- boto3: a list call returns a paginator-like Pager that follows the API's cursor lazily, with
  `pages()` for the pages themselves (boto3's `paginate()`); `executions.wait(id)` is a waiter
  (polls until the execution has ended, or WaitTimeout); the HTTP layer is a swappable
  transport under the session (botocore's), which is how the tests run it against the in-process
  stack; no resource objects with hidden calls on attribute access: every request is a method.
- Temporal's Python SDK: requests and answers are typed values, not dicts (here the API's own
  pydantic models: api/models.py for requests, api/schemas.py for answers, read leniently so a
  newer server's additions do not break an older client: client/answers.py), and a
  long-running target's handle (`client.callback(execution_id, token)` or
  `client.callback_for(headers)`, like Temporal's async activity handle) with `heartbeat`,
  `complete` and `fail`.

No async variant: the only HTTP stack the project depends on is the standard library's
blocking one; from asyncio, call the client in `asyncio.to_thread`."""
from jobsched.api.models import (BackfillRequest, BatchJobRequest, BulkRequest, CalendarRequest, JobFilter,
                                 JobRequest)
from jobsched.client.answers import dump
from jobsched.client.client import DEFAULT_URL, Callback, Client
from jobsched.client.errors import (ApiError, AuthenticationError, ConflictError, InvalidRequestError, NotFoundError,
                                    RateLimitError, ServiceUnavailableError)
from jobsched.client.resources import ENDED, Pager, WaitTimeout, new_idempotency_key, request_of
from jobsched.client.session import Retries, Session
from jobsched.client.transport import Response, Transport, urllib_transport

__all__ = ["ApiError", "AuthenticationError", "BackfillRequest", "BatchJobRequest", "BulkRequest", "Callback",
           "CalendarRequest", "Client", "ConflictError", "DEFAULT_URL", "InvalidRequestError", "JobFilter",
           "JobRequest", "NotFoundError", "Pager", "RateLimitError", "Response", "Retries",
           "ServiceUnavailableError", "Session", "Transport", "WaitTimeout", "ENDED", "dump", "new_idempotency_key",
           "request_of", "urllib_transport"]
