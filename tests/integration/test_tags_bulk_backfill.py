"""Tags and filters (through an index, never a scan of the tenant's jobs), bulk actions that are
safe to repeat, backfill without duplicates, pause with a reason."""
from urllib.parse import quote

from jobsched.domain.schedule import format_instant, parse_instant
from jobsched.service.jobs import JobsService

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/x"}


def make(harness, name, tags, schedule="0 3 * * *"):
    return harness.create_job({"name": name, "type": "CRON", "schedule": schedule, "target": HOOK, "tags": tags})


def names(harness, query):
    status, body = harness.request("GET", f"/v1/jobs?{query}")
    assert status == 200, body
    return [j["name"] for j in body["items"]], body["nextCursor"]


def test_tag_state_and_name_filters_and_their_pages(harness):
    for i in range(5):
        make(harness, f"report-{i}", {"team": "a", **({"env": "prod"} if i < 3 else {})})
    for i in range(3):
        make(harness, f"billing-{i}", {"team": "b", "odd": "x:y=z#w%"})
    assert sorted(names(harness, "tag=team:a&limit=100")[0]) == [f"report-{i}" for i in range(5)]
    assert sorted(names(harness, "tag=team:a&tag=env:prod")[0]) == ["report-0", "report-1", "report-2"]
    assert sorted(names(harness, "namePrefix=bill")[0]) == ["billing-0", "billing-1", "billing-2"]
    assert sorted(names(harness, f"tag={quote('odd:x:y=z#w%')}")[0]) == ["billing-0", "billing-1", "billing-2"]
    seen, cursor = [], None
    while True:  # pages of 2: every match once
        page, cursor = names(harness, "tag=team:a&limit=2" + (f"&cursor={cursor}" if cursor else ""))
        seen += page
        if not cursor:
            break
    assert sorted(seen) == [f"report-{i}" for i in range(5)]
    job = harness.request("GET", "/v1/jobs?namePrefix=report-4")[1]["items"][0]
    harness.request("POST", f"/v1/jobs/{job['jobId']}/pause", {"reason": "migrating"})
    assert names(harness, "tag=team:a&state=PAUSED")[0] == ["report-4"]
    status, body = harness.request("GET", "/v1/jobs?tag=nocolon")
    assert status == 400 and body["error"]["details"][0]["field"] == "tag"


def test_a_changed_tag_moves_the_job_and_a_stale_index_entry_is_passed_over(harness):
    job = make(harness, "moving", {"team": "a"})
    body = {"name": "moving", "type": "CRON", "schedule": "0 3 * * *", "target": HOOK, "tags": {"team": "b"}}
    assert harness.request("PUT", f"/v1/jobs/{job['jobId']}", body)[0] == 200
    assert names(harness, "tag=team:a")[0] == [] and names(harness, "tag=team:b")[0] == ["moving"]
    # an entry a crash left behind (index written, job not): listed jobs are read and checked
    harness.stores.jobs._index("tenant-a", {f"tag#team=a#{job['jobId']}", "tag#team=a#job_000000000000gone"})
    assert names(harness, "tag=team:a")[0] == []
    assert names(harness, "tag=team:a")[0] == [] and names(harness, "tag=team:b", )[0] == ["moving"]


def test_the_filtered_page_reads_the_index_not_the_tenants_jobs(harness, monkeypatch):
    for i in range(30):
        make(harness, f"other-{i}", {"team": "b"})
    make(harness, "mine", {"team": "a"})
    read = []
    original = harness.stores.jobs.get_many
    jobs_store = type(harness.stores.jobs)

    def counting(self, keys, whole=False):
        read.extend(keys)
        return original.__func__(self, keys, whole)

    monkeypatch.setattr(jobs_store, "get_many", counting)
    assert names(harness, "tag=team:a")[0] == ["mine"]
    assert len(read) == 1  # one job read for a page of one, whatever the tenant holds


def test_bulk_dry_run_apply_and_a_repeat_after_an_interruption(harness, monkeypatch):
    jobs = [make(harness, f"j{i}", {"team": "x"}) for i in range(6)]
    make(harness, "other", {"team": "y"})
    status, dry = harness.request("POST", "/v1/jobs/bulk", {"action": "PAUSE", "filter": {"tag": "team:x"},
                                                           "dryRun": True})
    assert status == 200 and (dry["matched"], dry["applied"]) == (6, 6)  # would apply; nothing changed
    assert sorted(dry["jobIds"]) == sorted(j["jobId"] for j in jobs)
    assert {harness.request("GET", f"/v1/jobs/{j['jobId']}")[1]["state"] for j in jobs} == {"ACTIVE"}
    # interrupted after three jobs
    original, done = JobsService.pause, []

    def pause_then_die(self, tenant_id, job_id, reason=None):
        if len(done) == 3:
            raise RuntimeError("the API function ran out of time")
        done.append(job_id)
        return original(self, tenant_id, job_id, reason)

    monkeypatch.setattr(JobsService, "pause", pause_then_die)
    status, _ = harness.request("POST", "/v1/jobs/bulk", {"action": "PAUSE", "filter": {"tag": "team:x"},
                                                         "reason": "freeze"})
    assert status == 500
    monkeypatch.setattr(JobsService, "pause", original)
    status, again = harness.request("POST", "/v1/jobs/bulk", {"action": "PAUSE", "filter": {"tag": "team:x"},
                                                             "reason": "freeze"})
    assert status == 200 and (again["matched"], again["applied"]) == (6, 3)  # the rest, once
    after = [harness.request("GET", f"/v1/jobs/{j['jobId']}")[1] for j in jobs]
    assert {(j["state"], j["pausedReason"], j["version"]) for j in after} == {("PAUSED", "freeze", 2)}  # one change each
    assert harness.request("GET", "/v1/jobs?tag=team:y")[1]["items"][0]["state"] == "ACTIVE"
    status, resumed = harness.request("POST", "/v1/jobs/bulk", {"action": "RESUME", "filter": {"tag": "team:x",
                                                                                              "state": "PAUSED"}})
    assert (resumed["matched"], resumed["applied"]) == (6, 6)
    job = harness.request("GET", f"/v1/jobs/{jobs[0]['jobId']}")[1]
    assert job["state"] == "ACTIVE" and job["pausedReason"] is None


def test_a_dry_run_counts_only_the_jobs_the_action_would_change(harness):
    # Given three matching jobs, one of them cancelled (a pause cannot change it)
    jobs = [make(harness, f"d{i}", {"team": "z"}) for i in range(3)]
    assert harness.request("DELETE", f"/v1/jobs/{jobs[0]['jobId']}")[0] == 200
    # When a pause is tried, then made
    dry = harness.request("POST", "/v1/jobs/bulk", {"action": "PAUSE", "filter": {"tag": "team:z"},
                                                   "dryRun": True})[1]
    done = harness.request("POST", "/v1/jobs/bulk", {"action": "PAUSE", "filter": {"tag": "team:z"}})[1]
    # Then the dry run said what the real one did, and listed the jobs it would change, not every match
    assert (dry["matched"], dry["applied"]) == (3, 2) and (done["matched"], done["applied"]) == (3, 2)
    assert sorted(dry["jobIds"]) == sorted(j["jobId"] for j in jobs[1:])


def test_a_bulk_action_on_every_job_must_be_asked_for_explicitly(harness):
    jobs = [make(harness, f"e{i}", {"team": "w"}) for i in range(2)]
    for body in ({"action": "CANCEL", "filter": {}}, {"action": "CANCEL"}):
        status, answer = harness.request("POST", "/v1/jobs/bulk", body)
        assert status == 422 and answer["error"]["details"][0]["field"] == "filter", answer
    assert {harness.request("GET", f"/v1/jobs/{j['jobId']}")[1]["state"] for j in jobs} == {"ACTIVE"}
    status, answer = harness.request("POST", "/v1/jobs/bulk", {"action": "PAUSE", "all": True, "dryRun": True})
    assert status == 200 and answer["matched"] >= 2


def test_backfill_runs_each_occurrence_once_with_its_on_time_id(harness):
    # Every ten minutes, not every hour: the same occurrences missed and run, in a sixth of the
    # ticks the test has to run.
    every_ms = 10 * 60_000
    job = harness.create_job({"name": "ten-minutely", "type": "RATE", "schedule": "PT10M", "target": HOOK})
    created = parse_instant(job["createdAt"], "createdAt")
    harness.request("POST", f"/v1/jobs/{job['jobId']}/pause", {"reason": "an outage downstream"})
    harness.advance(3 * every_ms / 1000 + 60, step_ms=60_000)  # paused: three occurrences missed
    assert harness.executions_of(job["jobId"]) == []
    window = {"from": format_instant(created), "to": format_instant(harness.clock.now_ms())}
    status, filled = harness.request("POST", f"/v1/jobs/{job['jobId']}/backfill", window)
    assert status == 202 and filled["count"] == 3, filled
    assert filled["executionIds"] == [f"{job['jobId']}.{created + n * every_ms:013d}" for n in (1, 2, 3)]
    harness.deliver()
    harness.request("POST", f"/v1/jobs/{job['jobId']}/resume")
    harness.advance(2 * every_ms / 1000 + 60, step_ms=60_000)  # two on-time fires after the resume
    window["to"] = format_instant(harness.clock.now_ms())
    status, again = harness.request("POST", f"/v1/jobs/{job['jobId']}/backfill", window)
    assert status == 202 and again["count"] == 5  # the three backfilled and the two that ran on time
    harness.deliver()
    effects = harness.target.effects_per_execution(job["jobId"])
    assert len(effects) == 5 and set(effects.values()) == {1}  # a window that already ran: no duplicates
    later = format_instant(harness.clock.now_ms() + every_ms)
    assert harness.request("POST", f"/v1/jobs/{job['jobId']}/backfill", {"from": window["to"], "to": later})[0] == 422
    assert harness.request("POST", f"/v1/jobs/{job['jobId']}/backfill",
                           {"from": window["to"], "to": window["from"]})[0] == 422
