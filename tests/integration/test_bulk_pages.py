"""Issue 28, item 9: a bulk action was one synchronous request over every match, restarted from
the first match when repeated, inside the API's reserved concurrency that heartbeats and
completions share. Now each request changes a bounded page; a larger bulk is recorded (position
and counts, conditional writes) and continued by the same request with its bulkId."""
from jobsched.service import jobs as jobs_service

from .capacity import ReadUnits

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}
PAGE = 10


def tagged(harness, count, team="a"):
    return [harness.create_job({"name": f"r{i}", "type": "RATE", "schedule": "PT1H", "target": HOOK,
                                "tags": {"team": team}})["jobId"] for i in range(count)]


def states(harness, ids):
    return [harness.request("GET", f"/v1/jobs/{i}")[1]["state"] for i in ids]


def test_a_large_bulk_changes_a_bounded_page_per_request_and_resumes_where_it_stopped(harness, monkeypatch):
    monkeypatch.setattr(jobs_service, "BULK_PAGE_MATCHES", PAGE)
    ids = tagged(harness, 25)
    other = tagged(harness, 2, team="b")
    body = {"action": "PAUSE", "filter": {"tag": "team:a"}, "reason": "maintenance"}
    status, first = harness.request("POST", "/v1/jobs/bulk", body)
    assert status == 202, first
    assert (first["matched"], first["applied"], first["done"]) == (PAGE, PAGE, False) and first["bulkId"]
    assert states(harness, ids).count("PAUSED") == PAGE  # one page, not the whole list
    reads = ReadUnits(harness.settings.jobs_table).install(monkeypatch)
    status, second = harness.request("POST", "/v1/jobs/bulk", {**body, "bulkId": first["bulkId"]})
    assert status == 202 and (second["matched"], second["applied"]) == (2 * PAGE, 2 * PAGE)
    # From where the first stopped: the second page's entries and jobs, and each changed job
    # read again by its own route; never the first page's matches again.
    assert reads.items_read < 4 * PAGE, (reads.items_read, reads.calls)
    status, third = harness.request("POST", "/v1/jobs/bulk", {**body, "bulkId": first["bulkId"]})
    assert status == 200 and (third["matched"], third["applied"], third["done"]) == (25, 25, True)
    assert third["jobIds"] == first["jobIds"] + second["jobIds"][PAGE:] + third["jobIds"][2 * PAGE:]
    assert sorted(third["jobIds"]) == sorted(ids)
    assert states(harness, ids) == ["PAUSED"] * 25 and states(harness, other) == ["ACTIVE"] * 2
    # A repeat of a done bulk only answers its totals; another body under its id is refused.
    assert harness.request("POST", "/v1/jobs/bulk", {**body, "bulkId": first["bulkId"]}) == (200, third)
    assert harness.request("POST", "/v1/jobs/bulk", {**body, "action": "CANCEL", "bulkId": first["bulkId"]})[0] == 409
    assert harness.request("POST", "/v1/jobs/bulk", {**body, "bulkId": "bulk_" + "0" * 32})[0] == 404
    assert harness.request("POST", "/v1/jobs/bulk", {**body, "bulkId": "job_1"})[0] in (400, 422)


def test_a_small_bulk_answers_in_one_request_as_before(harness, monkeypatch):
    monkeypatch.setattr(jobs_service, "BULK_PAGE_MATCHES", PAGE)
    ids = tagged(harness, PAGE - 1)
    status, answer = harness.request("POST", "/v1/jobs/bulk", {"action": "CANCEL", "filter": {"tag": "team:a"}})
    assert status == 200 and sorted(answer.pop("jobIds")) == sorted(ids)
    assert answer == {"matched": PAGE - 1, "applied": PAGE - 1, "bulkId": None, "done": True}
