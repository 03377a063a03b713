"""The multi-region simulation (local/regions.py): replication as DynamoDB global tables in MREC
do it (lag, last writer wins, deletes, conditions on the local copy), a region's loss and return,
partitions from the ownership table and from replication, and the whole stack in three regions."""
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from moto import mock_aws

from jobsched.domain.schedule import MS_PER_MINUTE as MINUTE_MS, format_instant, parse_instant
from jobsched.local.emulator import emulator_time, serialized_in_process
from jobsched.local.regions import RegionDown, RegionsSim

from .harness import ACCEPTED, KEY_A, TENANT_A

A, B, C = "us-east-1", "us-west-2", "eu-west-1"
LAG_MS = 5_000


@pytest.fixture
def make_sim(template, clock, monkeypatch):
    """Builds RegionsSims inside one emulator for the test (as conftest's `harness` builds a stack)."""
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    built = []
    with mock_aws(), serialized_in_process(), emulator_time(clock.now_ms):
        def make(regions=(A, B, C), **options):
            options.setdefault("lag_ms", LAG_MS)
            sim = RegionsSim(template, list(regions), clock, keys={TENANT_A: KEY_A}, **options)
            built.append(sim)
            # Start from quiet replication: the API key registered in the first region is everywhere.
            assert sim.replication_backlog() == {(regions[0], r): 1 for r in regions[1:]}
            sim.replicator.flush()
            return sim
        try:
            yield make
        finally:
            for sim in built:
                sim.close()


def _key(job_id: str) -> dict:
    return {"tenantId": {"S": "replication-test"}, "jobId": {"S": job_id}}


def _put(sim, region: str, job_id: str, value: str, **kwargs) -> None:
    sim.client(region).put_item(TableName=sim.table_name(region, "Jobs"),
                                Item={**_key(job_id), "v": {"S": value}}, **kwargs)


def _get(sim, region: str, job_id: str):
    item = sim.client(region).get_item(TableName=sim.table_name(region, "Jobs"), Key=_key(job_id),
                                       ConsistentRead=True).get("Item")
    return item["v"]["S"] if item else None


def test_a_write_is_invisible_elsewhere_before_the_lag_and_visible_after(make_sim):
    sim = make_sim()
    # Each region's CloudFormation names its tables afresh: the replicator matches them by logical id.
    assert len({sim.table_name(r, "Jobs") for r in (A, B, C)}) == 3
    _put(sim, A, "j1", "one")
    assert (_get(sim, A, "j1"), _get(sim, B, "j1"), _get(sim, C, "j1")) == ("one", None, None)
    assert sim.replication_backlog() == {(A, B): 1, (A, C): 1}

    sim.advance(LAG_MS / 1000 - 1)
    assert (_get(sim, B, "j1"), _get(sim, C, "j1")) == (None, None)

    sim.advance(2)
    assert (_get(sim, B, "j1"), _get(sim, C, "j1")) == ("one", "one")
    assert sim.replication_backlog() == {}
    # The API key registered in A was replicated too: B's API knows it.
    assert sim.request(B, "GET", "/v1/jobs")[0] == 200


def test_concurrent_updates_converge_to_the_later_write_in_every_region(make_sim):
    sim = make_sim()
    _put(sim, A, "j1", "from-a")
    sim.advance(1)
    _put(sim, B, "j1", "from-b")  # one second later, before A's write has arrived
    assert (_get(sim, A, "j1"), _get(sim, B, "j1")) == ("from-a", "from-b")

    sim.advance(10)
    assert [_get(sim, r, "j1") for r in (A, B, C)] == ["from-b"] * 3
    assert sim.replicator.superseded >= 1  # A's older write reached B (and C) after B's and lost


def test_a_skewed_clock_decides_last_writer_wins(make_sim):
    # B's clock runs 5 s ahead: its write, made first, carries the later timestamp.
    sim = make_sim(skew_ms={B: 5_000})
    _put(sim, B, "j1", "from-b")
    sim.advance(1)
    _put(sim, A, "j1", "from-a")
    sim.advance(10)
    assert [_get(sim, r, "j1") for r in (A, B, C)] == ["from-b"] * 3


def test_a_delete_replicates_and_an_older_write_does_not_bring_the_item_back(make_sim):
    sim = make_sim(pair_lag_ms={(B, A): 30_000})
    _put(sim, A, "j1", "one")
    sim.advance(6)
    assert _get(sim, B, "j1") == "one"

    sim.client(A).delete_item(TableName=sim.table_name(A, "Jobs"), Key=_key("j1"))
    sim.advance(6)
    assert [_get(sim, r, "j1") for r in (A, B, C)] == [None, None, None]

    # B writes the item, then A deletes it; B's write reaches A only after A's delete.
    _put(sim, B, "j2", "from-b")
    sim.advance(1)
    sim.client(A).delete_item(TableName=sim.table_name(A, "Jobs"), Key=_key("j2"))
    sim.advance(40)
    assert [_get(sim, r, "j2") for r in (A, B, C)] == [None, None, None]


def test_a_conditional_write_succeeds_against_a_stale_copy_then_last_writer_wins(make_sim):
    sim = make_sim()
    created_only_once = {"ConditionExpression": "attribute_not_exists(jobId)"}
    _put(sim, A, "claim", "a-claimed", **created_only_once)
    sim.advance(1)
    # B has not seen A's item yet: the same condition holds there (MREC evaluates it locally).
    _put(sim, B, "claim", "b-claimed", **created_only_once)
    with pytest.raises(ClientError) as refused:  # in A itself the condition sees A's own write
        _put(sim, A, "claim", "a-again", **created_only_once)
    assert refused.value.response["Error"]["Code"] == "ConditionalCheckFailedException"

    sim.advance(10)
    assert [_get(sim, r, "claim") for r in (A, B, C)] == ["b-claimed"] * 3


def test_a_killed_region_loses_its_unreplicated_writes_and_catches_up_when_revived(make_sim):
    sim = make_sim()
    _put(sim, A, "sent", "early")
    sim.advance(6)  # replicated
    _put(sim, A, "unsent", "late")
    assert sim.kill(A) == 2  # to B and to C
    with pytest.raises(RegionDown):
        sim.request(A, "GET", "/v1/jobs")
    _put(sim, B, "while-down", "b")
    sim.advance(30)
    assert [_get(sim, r, "unsent") for r in (B, C)] == [None, None]
    assert _get(sim, A, "while-down") is None  # A's tables are as they were at its death
    assert sim.replication_backlog() == {(B, A): 1}

    sim.revive(A)
    sim.advance(1)
    assert _get(sim, A, "while-down") == "b"
    assert _get(sim, A, "unsent") == "late"  # still in A's own table: it never left
    assert [_get(sim, r, "unsent") for r in (B, C)] == [None, None]
    assert sim.replication_backlog() == {}


def test_a_killed_region_may_keep_its_unreplicated_writes_until_it_returns(make_sim):
    sim = make_sim(regions=(A, B))
    _put(sim, A, "unsent", "late")
    assert sim.kill(A, lose_unreplicated=False) == 0
    sim.advance(30)
    assert _get(sim, B, "unsent") is None
    sim.revive(A)
    sim.advance(1)
    assert _get(sim, B, "unsent") == "late"


def test_a_partition_from_the_ownership_table_fails_only_that_regions_calls_to_it(make_sim):
    sim = make_sim()
    lease = {"segment": {"N": "0"}, "owner": {"S": A}, "epoch": {"N": "1"}}
    sim.partition(A, ownership=True)
    with sim.as_region(A), pytest.raises(EndpointConnectionError):
        sim.ownership_client(A).put_item(TableName=sim.ownership_table, Item=lease)
    with sim.as_region(A):
        _put(sim, A, "j1", "still-works")  # its own tables answer
        assert _get(sim, A, "j1") == "still-works"
    with sim.as_region(B):
        sim.ownership_client(B).put_item(TableName=sim.ownership_table, Item={**lease, "owner": {"S": B}})

    sim.heal(A)
    with sim.as_region(A):
        # One copy: A reads what B wrote, and a conditional write sees it.
        got = sim.ownership_client(A).get_item(TableName=sim.ownership_table, Key={"segment": {"N": "0"}})
        assert got["Item"]["owner"] == {"S": B}
        with pytest.raises(ClientError):
            sim.ownership_client(A).put_item(TableName=sim.ownership_table, Item=lease,
                                             ConditionExpression="attribute_not_exists(#s)",
                                             ExpressionAttributeNames={"#s": "segment"})


def test_a_partition_from_replication_holds_both_ways_until_healed(make_sim):
    sim = make_sim()
    sim.partition(A, ownership=False, replication=True)
    _put(sim, A, "out", "a")
    _put(sim, B, "in", "b")
    sim.advance(30)
    assert (_get(sim, B, "out"), _get(sim, C, "out"), _get(sim, A, "in")) == (None, None, None)
    assert _get(sim, C, "in") == "b"  # B and C still replicate between them
    sim.heal(A)
    sim.advance(1)
    assert (_get(sim, B, "out"), _get(sim, C, "out"), _get(sim, A, "in")) == ("a", "a", "b")


def _http_job(due_ms: int) -> dict:
    return {"name": "t", "type": "ONE_TIME", "runAt": format_instant(due_ms),
            "target": {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}, "payload": {"n": 1}}


# Due beyond the ticks' look-ahead (5 min 0.5 s from now): its timer is handed off by a tick, not
# by the API, so each region that ticks its segment (without leases: every region) dispatches it.
DUE_IN_MS = 300_500


def _units(report) -> float:
    return sum(use.read_units + use.write_units for _, use in report.hottest)


def test_a_job_created_in_one_region_fires_there_on_time_with_three_regions(make_sim):
    # Replication off: the job exists in A alone (B and C tick their segments and find nothing).
    sim = make_sim(lag_ms=1_000)
    sim.replicator.enabled = False
    settings = {r: sim.stack(r).settings for r in sim.regions}
    assert [settings[r].regions for r in sim.regions] == [(A, B, C)] * 3
    assert [settings[r].this_region for r in sim.regions] == [A, B, C]
    # The ownership table's replicas are A and B (the first two regions): each region calls its own
    # or the nearest first.
    assert [settings[r].ownership_regions for r in sim.regions] == [(A, B), (B, A), (A, B)]
    for region in sim.regions:
        sim.tick(region)  # each region takes its leases: a region holding none takes no create (503)
    billed = {r: _units(report) for r, report in sim.strict_reports().items()}
    due = sim.clock.now_ms() + DUE_IN_MS
    status, job = sim.request(A, "POST", "/v1/jobs", _http_job(due))
    assert status == 201, job

    sim.advance(330)
    fires = sim.fires_by_execution()
    assert [[(region, attempt) for region, attempt, _ in calls] for calls in fires.values()] == [[(A, 1)]]
    (_, _, at), = next(iter(fires.values()))
    assert due <= at < due + 1_000
    assert sim.failed_invocations == []
    # Each region's calls were checked and billed by that region's own strict layer, on its own tables.
    for region in sim.regions:
        report = sim.strict_reports()[region]
        assert _units(report) > billed[region] and report.denied == [], region
        others = {sim.table_name(r, hint) for r in sim.regions if r != region
                  for hint in ("Jobs", "Timers", "Executions", "Segments", "ApiKeys")}
        assert not [key for key, _ in report.hottest if key.split("[")[0].split("/")[0] in others], region


# Leases: only the segment's holder hands it off; per-region dispatch keys: no region's messages
# are read as forged after the replicas converge (store/segments.py).
def test_a_job_fires_exactly_once_across_three_regions(make_sim, caplog):
    sim = make_sim(lag_ms=1_000)
    for region in sim.regions:
        sim.tick(region)  # each region takes its leases
    due = sim.clock.now_ms() + DUE_IN_MS
    status, job = sim.request(A, "POST", "/v1/jobs", _http_job(due))
    assert status == 201, job
    sim.advance(330)
    fires = sim.fires_by_execution()
    assert [len(calls) for calls in fires.values()] == [1]
    (_, attempt, at), = next(iter(fires.values()))
    assert attempt == 1 and due <= at < due + 1_000
    # No region dropped a message its own tick sealed.
    assert not [r for r in caplog.records if "without a valid seal" in r.getMessage()]


def test_a_change_is_decided_in_the_region_that_holds_the_job_and_any_region_reads_it(make_sim):
    sim = make_sim(lag_ms=1_000)
    for region in sim.regions:
        sim.tick(region)
    status, job = sim.request(A, "POST", "/v1/jobs", _http_job(sim.clock.now_ms() + DUE_IN_MS))
    assert status == 201 and job["region"] == A
    sim.advance(3)  # replicated
    status, seen = sim.request(B, "GET", f"/v1/jobs/{job['jobId']}")
    assert status == 200 and seen["region"] == A and sim.forwarded == []  # any region reads
    # B holds none of A's segments: its API hands the trigger to A's, and answers with A's answer.
    status, body = sim.request(B, "POST", f"/v1/jobs/{job['jobId']}/trigger", {})
    assert status in (201, 202), body
    assert [(src, dst, status) for src, dst, _, status in sim.forwarded] == [(B, A, status)]
    # A key that is not valid is refused where it lands, never carried to another region.
    status, body = sim.request(B, "POST", f"/v1/jobs/{job['jobId']}/pause", {}, key="not-a-key")
    assert status == 401 and len(sim.forwarded) == 1

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}


def _every_minute(sim) -> dict[str, tuple[str, int]]:
    """One job a minute made in each region (RUN_ALL: an occurrence a failover made late still runs):
    {job id: (its region, its first due instant)}."""
    jobs = {}
    for region in sim.regions:
        status, body = sim.request(region, "POST", "/v1/jobs", {
            "name": f"{region}-every-minute", "type": "RATE", "schedule": "PT1M", "target": HOOK,
            "misfirePolicy": "RUN_ALL"})
        assert status == 201, body
        jobs[body["jobId"]] = (region, parse_instant(body["nextFireAt"], "nextFireAt"))
    return jobs


@pytest.mark.parametrize("fault", ["region killed", "replica lost"])
def test_losing_the_ownership_tables_nearest_replica_loses_nothing_and_runs_nothing_twice(make_sim, fault):
    # The ownership table's replicas: A and B (a witness elsewhere). C calls A's first (the nearer).
    sim = make_sim(lag_ms=1_000)
    assert sim.ownership_endpoints(C) == (A, B)
    sim.advance(70)  # the first ticks: every home takes its block
    jobs = _every_minute(sim)
    # Mid-minute: what A ran has reached the others (a write lost with its region is another
    # matter: test_regions_failover.py; nothing runs twice under one epoch there either).
    sim.advance(150)
    owned = {r: sim.request(r, "GET", "/v1/health")[1]["ownedSegments"] for r in sim.regions}
    assert all(owned.values())
    lost_at = sim.clock.now_ms()
    if fault == "region killed":
        sim.kill(A)  # A's functions, its data tables' replicas and its ownership replica
    else:
        sim.lose_ownership_replica(A)  # only A's DynamoDB endpoint for the leases fails
    sim.advance(360)
    end = sim.clock.now_ms()

    # C (and A, when it still runs) failed over to B's replica: each kept its segments all along
    # (B took a killed A's too).
    survivors = [C, B] + ([A] if fault == "replica lost" else [])
    for region in survivors:
        status, health = sim.request(region, "GET", "/v1/health")
        assert status == 200 and set(owned[region]) <= set(health["ownedSegments"]), (region, health)
    ran: dict[str, list] = {}
    for fire in sim.fires():
        ran.setdefault(fire.execution_id, []).append(fire)
    for job_id, (region, first) in jobs.items():
        for due in range(first, end - 150_000, MINUTE_MS):
            calls = ran.get(f"{job_id}.{due:013d}", [])
            assert len(calls) == 1, (region, due, calls)  # nothing lost, nothing run twice
            if region in survivors or due < lost_at:
                assert calls[0].at_ms - due < 1_000, (region, due, calls)  # and on time
    assert sim.failed_invocations == []


def test_a_long_running_targets_callbacks_and_a_tenants_changes_answer_the_same_in_any_region(make_sim):
    sim = make_sim(lag_ms=1_000)
    sim.advance(70)  # every home takes its block
    status, job = sim.request(A, "POST", "/v1/jobs", {
        "name": "long", "type": "DELAYED", "delaySeconds": 30, "target": HOOK, "heartbeatTimeoutSec": 60})
    assert status == 201 and job["region"] == A
    status, hourly = sim.request(A, "POST", "/v1/jobs", {"name": "hourly", "type": "RATE", "schedule": "PT1H",
                                                         "target": HOOK})
    assert status == 201 and hourly["region"] == A
    sim.invokers[A].script[job["jobId"]] = [ACCEPTED]
    sim.advance(31)
    [fire] = sim.fires()
    token = {"X-Callback-Token": sim.invokers[A].tokens[fire.execution_id]}
    calls = f"/v1/executions/{fire.execution_id}"

    # The front door routes each report by latency, to any region: each answers as A does.
    for minute, region in enumerate((B, C, A, B)):
        sim.advance(45)  # within the 60 s heartbeat deadline, far past it over the four
        status, answer = sim.request(region, "POST", f"{calls}/heartbeat", {"progress": {"step": minute}},
                                     key=None, headers=token)
        assert status == 200 and answer["status"] == "RUNNING", (region, answer)
    status, paused = sim.request(C, "POST", f"/v1/jobs/{hourly['jobId']}/pause", {})  # a tenant's change
    assert status == 200 and paused["state"] == "PAUSED", paused
    status, done = sim.request(C, "POST", f"{calls}/complete", {"output": {"rows": 42}}, key=None, headers=token)
    assert status == 200 and done["status"] == "SUCCEEDED" and done["output"] == {"rows": 42}, done
    sim.advance(200)
    status, execution = sim.request(A, "GET", calls)
    assert [a["status"] for a in execution["attempts"]] == ["SUCCEEDED"]  # never LOST, never run again
    assert len(sim.fires()) == 1
    assert sorted((src, dst) for src, dst, _, _ in sim.forwarded) == sorted([(B, A), (B, A), (C, A), (C, A), (C, A)])
    # A wrong token is answered by A (the holder), as a request sent to A is.
    status, body = sim.request(B, "POST", f"{calls}/heartbeat", {}, key=None, headers={"X-Callback-Token": "x" * 40})
    assert status == 401, body


def test_a_change_whose_region_does_not_answer_is_refused_for_a_retry_not_misrouted(make_sim):
    sim = make_sim(lag_ms=1_000)
    sim.advance(70)
    status, job = sim.request(A, "POST", "/v1/jobs", {"name": "hourly", "type": "RATE", "schedule": "PT1H",
                                                      "target": HOOK})
    assert status == 201
    sim.advance(3)
    # A forwarded request that lands in a region which does not hold the job either (the lease
    # moved meanwhile) is not sent on: a request crosses at most one region.
    status, body = sim.request(C, "POST", f"/v1/jobs/{job['jobId']}/pause", {},
                               headers={"X-Jobsched-Forwarded-By": B})
    assert status == 503 and body["error"]["code"] == "REGION_UNAVAILABLE" and sim.forwarded == [], body
    sim.kill(A)  # its lease still runs: B forwards to A, which does not answer
    status, body = sim.request(B, "POST", f"/v1/jobs/{job['jobId']}/pause", {})
    assert status == 503 and body["error"]["code"] == "REGION_UNAVAILABLE", body
    sim.advance(400)  # B takes A's segments: the change is decided there
    status, body = sim.request(C, "POST", f"/v1/jobs/{job['jobId']}/pause", {})
    assert status == 200 and body["state"] == "PAUSED", body
    assert [(src, dst) for src, dst, _, _ in sim.forwarded] == [(C, B)]


def test_a_bulk_action_changes_each_job_in_the_region_that_holds_it_or_answers_503(make_sim):
    # Before: the region the bulk request landed in changed every matching job itself, also those
    # whose segment another region held (whose claims and timers are that region's).
    sim = make_sim(lag_ms=1_000)
    sim.advance(70)  # every home takes its block
    jobs = {}
    for region in (A, B):
        status, job = sim.request(region, "POST", "/v1/jobs", {"name": f"bulk-{region}", "type": "RATE",
                                                               "schedule": "PT1H", "target": HOOK})
        assert status == 201 and job["region"] == region
        jobs[region] = job["jobId"]
    sim.advance(3)  # replicated
    status, answer = sim.request(B, "POST", "/v1/jobs/bulk", {"action": "PAUSE", "filter": {"namePrefix": "bulk-"},
                                                              "reason": "maintenance"})
    assert status == 200 and (answer["matched"], answer["applied"]) == (2, 2), answer
    # A's job was paused by A (its single-job route), B's by B: nothing crossed the other way.
    assert [(src, dst, path, code) for src, dst, path, code in sim.forwarded] == \
        [(B, A, f"/v1/jobs/{jobs[A]}/pause", 200)]
    sim.advance(3)
    for job_id in jobs.values():
        status, job = sim.request(C, "GET", f"/v1/jobs/{job_id}")
        assert (job["state"], job.get("pausedReason")) == ("PAUSED", "maintenance"), job
    # A gone while it still holds its segments: B cannot decide A's job, and says so (retry), rather
    # than changing it in the wrong region.
    sim.kill(A)
    status, answer = sim.request(B, "POST", "/v1/jobs/bulk", {"action": "RESUME", "filter": {"namePrefix": "bulk-"}})
    assert status == 503 and answer["error"]["code"] == "REGION_UNAVAILABLE", answer
    sim.advance(400)  # B takes A's segments: the same request now does it all in B
    status, answer = sim.request(B, "POST", "/v1/jobs/bulk", {"action": "RESUME", "filter": {"namePrefix": "bulk-"}})
    assert status == 200 and answer["matched"] == 2, answer
    assert len(sim.forwarded) == 1  # A did not answer the refused one; the retry needed none
    for job_id in jobs.values():
        assert sim.request(B, "GET", f"/v1/jobs/{job_id}")[1]["state"] == "ACTIVE"
