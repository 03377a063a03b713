"""Regions: a change to a job or an execution is decided in the region that holds the job's
segment now (its claims, timers and dispatches are that region's); any region reads. A change
that lands elsewhere is forwarded to the holder's API function and answered with its answer;
a bulk action's change of one job is made there through that job's own route (docs/architecture.md,
"Requests in any region: forwarding", "Bulk actions in regions"). The API handler's helpers."""
from __future__ import annotations

from typing import Any, Callable

from aws_lambda_powertools.event_handler import Response

from jobsched.domain.errors import WrongRegion
from jobsched.store.region_apis import FORWARDED_BY, RegionApis, RegionUnreachable, job_change_event

# A long-running target's reports: authorized by its callback token, which only the execution's
# record holds (written by the region that ran the attempt, perhaps not replicated here yet), so
# they are forwarded unchecked; every other change is a tenant's, whose key is checked first.
CALLBACK_ROUTES = frozenset({"heartbeat_execution", "complete_execution", "fail_execution"})


class Forwarding:
    """`event`: the request's API Gateway event; `header`: one of its headers; `tenant`: its
    tenant (raises Unauthorized for a bad key)."""

    def __init__(self, parts, region_apis: RegionApis, event: Callable[[], dict],
                 header: Callable[[str], str | None], tenant: Callable[[], str], logger: Any) -> None:
        self._parts, self._apis, self._event, self._header, self._tenant = parts, region_apis, event, header, tenant
        self._logger = logger

    def holder_elsewhere(self, route_name: str, job_id: str | None) -> str | None:
        """The region this change is forwarded to, or None: this region decides it."""
        parts = self._parts
        if not job_id or parts.ownership.epoch_for(parts.handoff.segment_of(job_id)) is not None:
            return None
        this = parts.settings.this_region
        holder = parts.ownership.holder(parts.handoff.segment_of(job_id))
        if holder is None or holder == this or self._header(FORWARDED_BY) or not self._apis.configured:
            raise WrongRegion(f"this region ({this}) does not schedule this job now and no region can take the "
                              "change at this moment (its segment is moving between regions); retry shortly")
        if route_name not in CALLBACK_ROUTES:
            self._tenant()  # a request without a valid key is answered here, not carried to another region
        return holder

    def forward(self, holder: str) -> Response:
        """The holder region's answer to this same request (store/region_apis.py)."""
        try:
            answer = self._apis.call(holder, self._event())
        except RegionUnreachable:
            self._logger.warning("the region that schedules this job did not answer", extra={"holder": holder},
                                 exc_info=True)
            raise WrongRegion(f"the region that schedules this job now ({holder}) did not answer; retry shortly") \
                from None
        headers = {name: values for name, values in (answer.get("multiValueHeaders") or {}).items()}
        headers.update(answer.get("headers") or {})
        self._logger.info("forwarded", extra={"holder": holder, "status": answer["statusCode"]})
        return Response(status_code=int(answer["statusCode"]), body=answer.get("body"), headers=headers)

    def change_elsewhere(self, job_id: str, action: str, reason: str | None) -> bool | None:
        """A bulk action's change of a job another region holds, made there through its single-job
        route (service/jobs.py ChangeElsewhere). None: this region holds the job."""
        holder = self.holder_elsewhere("bulk_jobs", job_id)
        if holder is None:
            return None
        method, path, body = {"PAUSE": ("POST", f"/v1/jobs/{job_id}/pause", {"reason": reason} if reason else {}),
                              "RESUME": ("POST", f"/v1/jobs/{job_id}/resume", None),
                              "CANCEL": ("DELETE", f"/v1/jobs/{job_id}", None)}[action]
        try:
            status = int(self._apis.call(holder, job_change_event(self._event(), method, path, body))["statusCode"])
        except RegionUnreachable:
            status = 0
        self._logger.info("bulk change forwarded", extra={"holder": holder, "status": status})
        if status in (200, 404, 409):
            return status == 200
        raise WrongRegion(f"the region that schedules job {job_id} now ({holder}) did not take the change; "
                          "retry shortly (the same request does this page again)")
