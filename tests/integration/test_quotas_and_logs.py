"""Tenant quotas answer 429; secrets never reach the logs."""
import io
import json

from jobsched.handlers import api
from jobsched.local.events import Function, api_gateway_event, http_response
from jobsched.settings import Env

from .harness import KEY_A, KEY_B

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}
BODY = {"name": "q", "type": "RATE", "schedule": "PT1H", "target": HOOK}


def limited_api(harness, **limits):
    env = {**harness.envs["api"], **{getattr(Env, k): str(v) for k, v in limits.items()}}
    return Function("api", api.make_handler(env, harness.clock, harness.session))


def call(function, method, path, body=None, key=KEY_A, headers=None):
    all_headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json", **(headers or {})}
    status, _, raw = http_response(function.invoke(api_gateway_event(method, path, all_headers,
                                                                     json.dumps(body) if body else None)))
    return status, json.loads(raw)


def test_active_jobs_quota_answers_429_and_frees_up_when_a_job_ends(harness):
    limited = limited_api(harness, MAX_ACTIVE_JOBS=2)
    first = call(limited, "POST", "/v1/jobs", BODY)[1]
    call(limited, "POST", "/v1/jobs", BODY)
    status, answer = call(limited, "POST", "/v1/jobs", BODY)
    assert status == 429 and answer["error"]["code"] == "QUOTA_EXCEEDED" and "2 jobs" in answer["error"]["message"]
    assert call(limited, "POST", "/v1/jobs", BODY, key=KEY_B)[0] == 201  # quotas are per tenant
    call(limited, "DELETE", f"/v1/jobs/{first['jobId']}")
    assert call(limited, "POST", "/v1/jobs", BODY)[0] == 201
    one_off = {"name": "o", "type": "DELAYED", "delaySeconds": 5, "target": HOOK}
    assert call(limited, "POST", "/v1/jobs", one_off)[0] == 429
    active = call(limited, "GET", "/v1/jobs?state=ACTIVE")[1]["items"]
    call(limited, "DELETE", f"/v1/jobs/{active[0]['jobId']}")
    assert call(limited, "POST", "/v1/jobs", one_off)[0] == 201
    harness.advance(8)  # the one-off runs and completes: its place is given back
    assert call(limited, "POST", "/v1/jobs", BODY)[0] == 201


def test_creates_per_second_quota_answers_429_until_the_next_second(harness):
    limited = limited_api(harness, MAX_CREATES_PER_SECOND=3)
    statuses = [call(limited, "POST", "/v1/jobs", BODY)[0] for _ in range(5)]
    assert statuses == [201, 201, 201, 429, 429]
    harness.clock.advance_ms(1000)
    assert call(limited, "POST", "/v1/jobs", BODY)[0] == 201


def test_api_keys_authorization_headers_and_callback_tokens_never_reach_the_logs(harness, capsys):
    logged = io.StringIO()
    for handler in api.logger._logger.handlers:
        handler.setStream(logged)
    api.logger.setLevel("DEBUG")
    try:
        harness.create_job(BODY)
        harness.request("GET", "/v1/jobs")
        harness.request("GET", "/v1/jobs", key="wrong-secret-key")
        harness.request("POST", "/v1/executions/job_x.1/heartbeat", {}, key=None,
                        headers={"X-Callback-Token": "callback-secret"})
    finally:
        api.logger.setLevel("INFO")
    output = logged.getvalue() + capsys.readouterr().out
    assert "job created" in output and '"tenantId":"tenant-a"' in output.replace(" ", "")
    for secret in (KEY_A, "wrong-secret-key", "callback-secret", "Bearer"):
        assert secret not in output


def test_api_metrics_count_requests_and_errors_by_route(harness, capsys):
    harness.create_job(BODY)
    harness.request("GET", "/v1/jobs/job_missing")
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]
    by_route = {(line.get("route"), name) for line in lines for name in ("ApiRequests", "Api4xx") if name in line}
    assert ("create_job", "ApiRequests") in by_route
    assert ("get_job", "Api4xx") in by_route


def quota_items(harness, tenant):
    table = harness.session.resource("dynamodb").Table(harness.settings.jobs_table)
    items = table.query(KeyConditionExpression="tenantId = :t AND begins_with(jobId, :q)",
                        ExpressionAttributeValues={":t": tenant, ":q": "quota#"}, ConsistentRead=True)["Items"]
    return {i["jobId"]: int(i["used"]) for i in items}


def test_a_busy_tenants_counters_are_sharded_and_still_exact_within_the_shard_count(harness):
    from jobsched.service.jobs import Quotas

    from .harness import TENANT_A

    # 1,000 creates a second: the per-second counter in 2 shards, the active-jobs counter in 4
    # (each written about 500 times a second at most), 3 places each for a quota of 10.
    quotas = Quotas(max_active_jobs=10, max_creates_per_second=1000)
    assert quotas.active_shards == 4
    limited = limited_api(harness, MAX_ACTIVE_JOBS=10, MAX_CREATES_PER_SECOND=1000)
    created = []
    for _ in range(20):
        status, body = call(limited, "POST", "/v1/jobs", BODY)
        if status != 201:
            assert status == 429 and "10 jobs" in body["error"]["message"]
            break
        created.append(body)
    # Refused only once every shard was full: never fewer than the quota, at most 3 more.
    assert len(created) == 12
    active = {k: v for k, v in quota_items(harness, TENANT_A).items() if k.startswith("quota#active")}
    assert active == {"quota#active": 3, "quota#active#1": 3, "quota#active#2": 3, "quota#active#3": 3}
    # A cancelled job gives its place back to the shard it holds, and that place is taken again.
    cancelled = created[5]
    call(limited, "DELETE", f"/v1/jobs/{cancelled['jobId']}")
    assert sum(v for k, v in quota_items(harness, TENANT_A).items() if k.startswith("quota#active")) == 11
    assert call(limited, "POST", "/v1/jobs", BODY)[0] == 201
    assert call(limited, "POST", "/v1/jobs", BODY)[0] == 429


def test_a_one_time_job_gives_its_place_back_to_its_own_shard_when_it_ends(harness):
    from .harness import TENANT_A

    limited = limited_api(harness, MAX_ACTIVE_JOBS=100, MAX_CREATES_PER_SECOND=2000)  # 8 shards
    one_offs = [call(limited, "POST", "/v1/jobs", {"name": f"o{i}", "type": "DELAYED", "delaySeconds": 5,
                                                    "target": HOOK})[1] for i in range(6)]
    before = quota_items(harness, TENANT_A)
    assert sum(v for k, v in before.items() if k.startswith("quota#active")) == 6
    assert len([k for k in before if k.startswith("quota#active")]) > 1  # spread over shards
    harness.advance(8)
    for job in one_offs:
        assert harness.request("GET", f"/v1/jobs/{job['jobId']}")[1]["state"] == "COMPLETED"
    after = quota_items(harness, TENANT_A)
    assert all(v == 0 for k, v in after.items() if k.startswith("quota#active"))


def test_a_worker_batch_gives_back_its_one_time_jobs_places_in_one_write_per_counter(harness):
    import boto3

    from jobsched.handlers import worker as worker_handler
    from jobsched.local.events import sqs_event

    from .harness import TENANT_A

    jobs = [harness.create_job({"name": f"o{i}", "type": "DELAYED", "delaySeconds": 150, "target": HOOK})
            for i in range(10)]
    assert quota_items(harness, TENANT_A)["quota#active"] == 10
    harness.advance(60)
    harness.clock.set_ms(harness.clock.now_ms() + 120_000)  # all ten due
    messages = []
    for url in harness.lane_urls:
        while batch := harness.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
            messages += batch
    assert len(messages) == 10
    session = boto3.session.Session(region_name="us-east-1")
    quota_writes = []

    def count(params, **_):
        if params.get("Key", {}).get("jobId", {}).get("S", "").startswith("quota#"):
            quota_writes.append(params["ExpressionAttributeValues"])

    session.events.register("provide-client-params.dynamodb.UpdateItem", count)
    fn = Function("worker", worker_handler.make_handler(harness.envs["worker"], harness.clock, session, harness.target))
    assert fn.invoke(sqs_event(messages, "arn:aws:sqs:us-east-1:123456789012:lane")) == {"batchItemFailures": []}
    assert quota_writes == [{":minus": {"N": "-10"}, ":count": {"N": "10"}}]
    assert quota_items(harness, TENANT_A)["quota#active"] == 0
    assert all(harness.request("GET", f"/v1/jobs/{j['jobId']}")[1]["state"] == "COMPLETED" for j in jobs)


def test_giving_back_more_than_is_counted_stops_at_zero(harness):
    from .harness import TENANT_A

    store = harness.stores.jobs
    assert store.take_create_place(TENANT_A, "probe", 10, 100, 10)[0] is None
    assert store.take_create_place(TENANT_A, "probe", 10, 100, 10)[0] is None
    store.give_back_quota(TENANT_A, "probe", 5)
    assert quota_items(harness, TENANT_A)["quota#probe"] == 0
    store.give_back_quota(TENANT_A, "probe")
    assert quota_items(harness, TENANT_A)["quota#probe"] == 0


def _quota_writes(harness, session):
    """The UpdateItems of quota items made through `session`, with whether each succeeded."""
    writes = []

    def sent(params, **_):
        key = params.get("Key", {}).get("jobId")
        if str(key.get("S") if isinstance(key, dict) else key).startswith("quota#"):
            writes.append(params["UpdateExpression"])

    session.events.register("provide-client-params.dynamodb.UpdateItem", sent)
    return writes


def test_a_create_counts_both_quotas_in_one_write_to_one_item(harness):
    import boto3

    from .harness import TENANT_A

    session = boto3.session.Session(region_name="us-east-1")
    writes = _quota_writes(harness, session)
    api_fn = Function("api", api.make_handler(harness.envs["api"], harness.clock, session))
    # A create in a second of its own: one write, which starts the item's second
    assert call(api_fn, "POST", "/v1/jobs", BODY)[0] == 201
    assert writes == ["ADD used :n SET sec = :sec, secUsed = :n"]
    # Three more in that same second: one write each, counted in it
    for _ in range(3):
        assert call(api_fn, "POST", "/v1/jobs", BODY)[0] == 201
    assert writes[1:] == ["ADD used :n, secUsed :n"] * 3
    item = harness.session.resource("dynamodb").Table(harness.settings.jobs_table).get_item(
        Key={"tenantId": TENANT_A, "jobId": "quota#active"}, ConsistentRead=True)["Item"]
    assert (item["used"], item["secUsed"], item["sec"]) == (4, 4, harness.clock.now_ms() // 1000)
    # and no counter item of its own for the second any more
    assert set(quota_items(harness, TENANT_A)) == {"quota#active"}
    # A later second starts again at one, with one write
    harness.clock.advance_ms(1000)
    del writes[:]
    assert call(api_fn, "POST", "/v1/jobs", BODY)[0] == 201
    assert writes == ["ADD used :n SET sec = :sec, secUsed = :n"]


def test_the_active_jobs_quota_and_the_rate_are_told_apart_when_one_item_counts_both(harness):
    limited = limited_api(harness, MAX_ACTIVE_JOBS=2, MAX_CREATES_PER_SECOND=5)
    assert [call(limited, "POST", "/v1/jobs", BODY)[0] for _ in range(2)] == [201, 201]
    status, body = call(limited, "POST", "/v1/jobs", BODY)
    assert status == 429 and "2 jobs that have not ended" in body["error"]["message"]
    harness.clock.advance_ms(1000)
    status, body = call(limited, "POST", "/v1/jobs", BODY)
    assert status == 429 and "2 jobs that have not ended" in body["error"]["message"]
    limited = limited_api(harness, MAX_ACTIVE_JOBS=100, MAX_CREATES_PER_SECOND=2)
    assert [call(limited, "POST", "/v1/jobs", BODY)[0] for _ in range(2)] == [201, 201]  # this second's two
    status, body = call(limited, "POST", "/v1/jobs", BODY)
    assert (status, body["error"]["message"].startswith("more than 2 jobs created in one second")) == (429, True)


def test_an_item_a_second_ahead_counts_the_create_in_its_second_and_holds_its_rate(harness):
    from .harness import TENANT_A

    store = harness.stores.jobs
    # Another API container, its clock a second ahead, counted 2 creates in second 101
    assert store.take_create_place(TENANT_A, "skew", 100, 101, 2) == (None, 101)
    assert store.take_create_place(TENANT_A, "skew", 100, 101, 2) == (None, 101)
    # This container, in second 100, counts against that later second: full
    assert store.take_create_place(TENANT_A, "skew", 100, 100, 2) == ("rate", 101)
    assert store.take_create_place(TENANT_A, "skew", 100, 100, 2, new_second_first=True) == ("rate", 101)
    # In second 102 it starts again, whichever write it tries first
    assert store.take_create_place(TENANT_A, "skew", 100, 102, 2) == (None, 102)
    assert store.take_create_place(TENANT_A, "skew", 100, 102, 2, new_second_first=True) == (None, 102)
    assert quota_items(harness, TENANT_A)["quota#skew"] == 4


def test_a_container_whose_clock_lags_counts_its_create_in_the_items_later_second_in_two_writes(harness):
    from .harness import TENANT_A

    store = harness.stores.jobs
    assert store.take_create_place(TENANT_A, "lag", 100, 101, 2) == (None, 101)  # a container ahead
    writes = []
    update = store._table.update_item

    def counted(**kwargs):
        writes.append(kwargs["UpdateExpression"])
        return update(**kwargs)

    store._table.update_item = counted
    try:
        # Its own second (100) is behind the item's (101), which has room for one more: admitted there
        assert store.take_create_place(TENANT_A, "lag", 100, 100, 2) == (None, 101)
        assert len(writes) == 2  # the guess for second 100 failed; the next write counted it in 101
        # and once 101 is full, refused for the rate without trying a new second
        del writes[:]
        assert store.take_create_place(TENANT_A, "lag", 100, 100, 2) == ("rate", 101)
        assert len(writes) == 1
    finally:
        store._table.update_item = update
    assert quota_items(harness, TENANT_A)["quota#lag"] == 2


def test_with_one_shard_full_of_jobs_and_another_of_this_seconds_creates_the_429_names_the_rate(harness):
    from jobsched.service.jobs import Quotas

    from .harness import TENANT_A

    assert Quotas(max_active_jobs=4, max_creates_per_second=500).active_shards == 2  # 2 places, 250 a second each
    table = harness.session.resource("dynamodb").Table(harness.settings.jobs_table)
    second = harness.clock.now_ms() // 1000
    table.put_item(Item={"tenantId": TENANT_A, "jobId": "quota#active", "used": 2})
    table.put_item(Item={"tenantId": TENANT_A, "jobId": "quota#active#1", "used": 0, "sec": second, "secUsed": 250})
    limited = limited_api(harness, MAX_ACTIVE_JOBS=4, MAX_CREATES_PER_SECOND=500)
    status, body = call(limited, "POST", "/v1/jobs", BODY)
    assert status == 429 and body["error"]["message"].startswith("more than 500 jobs created in one second")
    # The next second shard 1 has room again
    harness.clock.advance_ms(1000)
    assert call(limited, "POST", "/v1/jobs", BODY)[0] == 201


def tick_metrics(out: str) -> set[tuple[str, str | None]]:
    """(metric name, Segment dimension or None) of the tick's EMF lines in `out`."""
    found = set()
    for line in out.splitlines():
        if line.startswith('{"_aws"'):
            doc = json.loads(line)
            if doc.get("service") == "jobsched-tick":
                for directive in doc["_aws"]["CloudWatchMetrics"]:
                    found |= {(m["Name"], doc.get("Segment")) for m in directive["Metrics"]}
    return found


def test_healthy_ticks_send_no_metric_and_log_their_duration_and_dispatches(harness, capsys, caplog):
    # A custom metric is billed in every hour it receives data: a healthy tick sends no zero counts,
    # no metric per segment (each was $0.30 a month: 20 of a quiet deployment's 25 metrics) and no
    # Dispatched count (its log line carries it; the dashboard sums it with Logs Insights).
    harness.create_job({**BODY, "schedule": "PT1M"})
    capsys.readouterr()
    harness.advance(180)
    out = capsys.readouterr().out
    assert tick_metrics(out) == set()
    ticks = [r for r in caplog.records if r.name == "jobsched-tick" and r.getMessage() == "tick"]
    assert ticks and all(isinstance(r.durationMs, int) and isinstance(r.segment, int) for r in ticks)
    assert sum(r.dispatched for r in ticks) >= 2


def test_a_tick_that_catches_up_says_so_and_which_segment(harness, capsys):
    harness.create_job({**BODY, "schedule": "PT1M"})
    harness.ticks_enabled = False
    harness.advance(300)
    harness.ticks_enabled = True
    capsys.readouterr()
    harness.advance(60)
    sent = tick_metrics(capsys.readouterr().out)
    # caught up in one run (MinutesBehind, 0 after it, is not sent), with the segments that did
    assert ("BucketsCaughtUp", None) in sent
    assert {name for name, segment in sent if segment is not None} == {"SegmentBucketsCaughtUp"}
