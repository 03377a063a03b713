"""The console read at a glance (issue 23, item 6), in Debian's Chromium driven by Selenium against
the local stack: the overview's charts agree with the API, the job page draws the occurrence
ledger as a timeline with the reasons (and says "not available" where the route is missing), a
workflow run is drawn as its DAG with each step's state, and the job form previews the next fires
as you type in the job's zone and the viewer's, and shows the API's errors by the named field.
Screenshots go to $JOBSCHED_SCREENSHOTS (docs/ keeps the guide's), else a temp dir."""
import re
import time
from datetime import datetime, timedelta, timezone

import pytest
from selenium.webdriver.common.keys import Keys

from jobsched.local.echo import EchoServer

from .console_support import (  # noqa: F401 - fixtures
    ApiProxy, _strict_layer_for_each_test, browser, call, find, find_all, screenshots, sign_in, stack, text_of,
    wait_for)

FAILING = {"type": "HTTP", "url": "http://127.0.0.1:9/x"}  # nothing listens: every attempt fails
ONCE = {"maxAttempts": 1, "backoff": "FIXED", "initialDelayMs": 1000, "maxDelayMs": 1000}
ENDED = {"SUCCEEDED", "DEAD", "CANCELLED", "SKIPPED"}


@pytest.fixture(scope="module")
def echo():
    server = EchoServer(out=open("/dev/null", "w"))  # noqa: SIM115 - closed with the process
    yield server
    server.stop()


def wait_until(read, seconds=60.0):
    """The local stack runs on the wall clock: wait for what it does (polling, no fixed sleep)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = read()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"not reached within {seconds} s")


def executions(runtime, job_id, key):
    return call(runtime, "GET", f"/v1/jobs/{job_id}/executions?limit=100", key=key)["items"]


def nearest_rank(values, percent):
    values = sorted(values)
    return values[max(0, -(-percent * len(values) // 100) - 1)] if values else None


def test_the_overview_charts_what_the_api_says(stack, browser, echo, tmp_path):  # noqa: F811
    shots = screenshots(tmp_path)
    ok = call(stack, "POST", "/v1/jobs", {"name": "heartbeat-probe", "type": "RATE", "schedule": "PT1S",
                                          "target": {"type": "HTTP", "url": echo.url + "/ok"}, "maxRuns": 8}, key="k2")
    bad = call(stack, "POST", "/v1/jobs", {"name": "broken-export", "type": "RATE", "schedule": "PT2S",
                                           "target": FAILING, "retryPolicy": ONCE, "maxRuns": 3}, key="k2")
    # Given both jobs ran out of runs and every execution ended
    for job in (ok, bad):
        wait_until(lambda job=job: call(stack, "GET", f"/v1/jobs/{job['jobId']}", key="k2")["state"] == "COMPLETED")
        wait_until(lambda job=job: all(e["status"] in ENDED for e in executions(stack, job["jobId"], "k2")))
    history = executions(stack, ok["jobId"], "k2") + executions(stack, bad["jobId"], "k2")
    fired = [e for e in history if e["status"] not in ("SKIPPED", "CANCELLED")]
    lateness = [e["lateMs"] for e in fired if e["lateMs"] is not None]
    failed_attempts = sum(a["status"] in ("FAILED", "TIMED_OUT", "LOST", "DEAD") for e in history for a in e["attempts"])
    stats = [call(stack, "GET", f"/v1/jobs/{j['jobId']}/stats?window=1h", key="k2") for j in (ok, bad)]
    dead = call(stack, "GET", "/v1/dead-letters?limit=100", key="k2")["items"]
    assert len(dead) == sum(s["dead"] for s in stats) == 3 and len(fired) == sum(s["fires"] for s in stats) == 11

    # When the overview is open over the last hour
    sign_in(browser, stack.api_url, "k2")
    loaded = "return document.getElementById('overview-view').dataset.loaded"
    wait_for(browser, lambda: browser.execute_script(loaded) == "3")  # the default window
    find(browser, "#overview-window option[value='1']").click()
    wait_for(browser, lambda: browser.execute_script(loaded) == "1")
    tiles = {t.get_attribute("data-tile"): t.get_attribute("data-value") for t in find_all(browser, "#overview-tiles .tile")}

    # Then its figures are the API's: fires, lateness percentiles, failed attempts, dead letters
    assert tiles == {"fires": "11", "p50": str(nearest_rank(lateness, 50)), "p99": str(nearest_rank(lateness, 99)),
                     "failed": str(failed_attempts), "dead": "3", "jobs": "2"}

    def bars(chart, series):
        return [(r.get_attribute("data-at"), int(r.get_attribute("data-value")))
                for r in find_all(browser, f"#{chart} [data-series='{series}']")]
    fires = bars("chart-fires", "fires")
    assert sum(v for _, v in fires) == 11  # one bar per minute that had fires
    per_minute = {}
    for e in fired:
        minute = e["scheduledAt"][:16] + ":00.000Z"
        per_minute[minute] = per_minute.get(minute, 0) + 1
    assert dict(fires) == per_minute
    assert sum(v for _, v in bars("chart-failures", "failed")) == failed_attempts
    assert sum(v for _, v in bars("chart-failures", "dead")) == 3
    p99 = bars("chart-lateness", "p99")
    assert p99 and max(v for _, v in p99) == nearest_rank(lateness, 99)
    browser.save_screenshot(str(shots / "console-overview.png"))


def occurrences_shape(now):
    """What ../shared/API.md documents for GET /v1/jobs/{jobId}/occurrences: one of each outcome
    and reason the timeline must tell apart, oldest first."""
    def at(minutes):
        return (now + timedelta(minutes=minutes)).replace(second=0, microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
    def occurrence(minutes, outcome, reason=None, status=None, late=None, expectation=None):
        item = {"scheduledAt": at(minutes), "outcome": outcome, "reason": reason,
                "executionId": f"job.{at(minutes)}" if outcome == "FIRED" else None, "lateMs": late, "status": status}
        if expectation:
            item["expectation"] = expectation
        return item
    return [occurrence(-300, "FIRED", status="SUCCEEDED", late=140),
            occurrence(-240, "SKIPPED", "OVERLAP"),
            occurrence(-200, "FIRED", status="SUCCEEDED", late=95, expectation="MISSING"),
            occurrence(-180, "SKIPPED", "PAUSED"),
            occurrence(-170, "SKIPPED", "PAUSED"),
            occurrence(-120, "SKIPPED", "MISSED_WINDOW"),
            occurrence(-60, "SKIPPED", "EXCLUDED"),
            occurrence(-30, "FIRED", status="DEAD", late=2300),
            occurrence(-10, "SKIPPED", "DEDUPLICATED"),
            occurrence(20, "PENDING"),
            occurrence(40, "PENDING")]


def ledger_route(ledger):
    """GET /v1/jobs/{jobId}/occurrences as ../shared/API.md has it, over a fixed ledger: the
    occurrences of [from, to), oldest first, `limit` a page, and an opaque cursor to the next."""
    def answer(path, query):
        lower = datetime.fromisoformat(query["from"][0].replace("Z", "+00:00"))
        upper = datetime.fromisoformat(query["to"][0].replace("Z", "+00:00"))
        limit = int(query.get("limit", ["20"])[0])
        start = int(query["cursor"][0].removeprefix("after-")) if "cursor" in query else 0
        inside = [o for o in ledger
                  if lower <= datetime.fromisoformat(o["scheduledAt"].replace("Z", "+00:00")) < upper][start:]
        more = len(inside) > limit
        return 200, {"items": inside[:limit], "nextCursor": f"after-{start + limit}" if more else None}
    return answer


def test_the_job_page_draws_the_occurrence_ledger_with_the_reasons(stack, browser, tmp_path):  # noqa: F811
    shots = screenshots(tmp_path)
    job = call(stack, "POST", "/v1/jobs", {"name": "invoice-sync", "type": "CRON", "schedule": "*/10 * * * *",
                                           "timezone": "Europe/Paris", "target": FAILING}, key="k3")
    ledger = occurrences_shape(datetime.now(timezone.utc))
    proxy = ApiProxy(stack.api_url)
    proxy.routes[rf"/v1/jobs/{job['jobId']}/occurrences"] = ledger_route(ledger)
    try:
        sign_in(browser, proxy.url, "k3", "job/" + job["jobId"])
        wait_for(browser, lambda: len(find_all(browser, "#timeline [data-outcome]")) == len(ledger))
        marks = [(m.get_attribute("data-outcome"), m.get_attribute("data-reason"), m.get_attribute("data-at"))
                 for m in find_all(browser, "#timeline [data-outcome]")]
        assert marks == [(o["outcome"], o["reason"] or "", o["scheduledAt"]) for o in ledger]
        # The past with the reasons spelled out, newest first, with the expectation and the
        # execution's state; what is still to come is said apart
        wait_for(browser, lambda: len(find_all(browser, "tr.occurrence")) == 9)
        rows = [[c.text for c in r.find_elements("css selector", "td")] for r in find_all(browser, "tr.occurrence")]
        assert [r[1] for r in rows] == [o["outcome"] for o in reversed(ledger[:9])]
        assert [r[2] for r in rows][::-1] == ["SUCCEEDED", "OVERLAP", "MISSING · SUCCEEDED", "PAUSED", "PAUSED",
                                              "MISSED_WINDOW", "EXCLUDED", "DEAD", "DEDUPLICATED"]
        assert re.fullmatch(r"\d+ min ago \(.*\)", rows[0][0]) and re.fullmatch(r"\d+ h ago \(.*\)", rows[-1][0])
        assert text_of(browser, "#occurrences-upcoming") == "2 pending in the window; the next due " + \
            ledger[9]["scheduledAt"]
        assert text_of(browser, "#timeline-status").startswith("11 occurrences: FIRED 3, SKIPPED OVERLAP 1")
        # Asked with the user's key for windows the route takes (at most 31 days)
        assert {s["authorization"] for s in proxy.seen} == {"Bearer k3"}
        window = proxy.seen[0]["query"]
        span = datetime.fromisoformat(window["to"][0]) - datetime.fromisoformat(window["from"][0])
        assert timedelta(hours=6) < span <= timedelta(days=31)
        browser.execute_script("document.getElementById('timeline-title').scrollIntoView()")
        browser.save_screenshot(str(shots / "console-job-timeline.png"))

        # A deployment without the ledger answers 404 for its route: "not available", and the rest stands
        proxy.routes[rf"/v1/jobs/{job['jobId']}/occurrences"] = lambda path, query: (
            404, {"error": {"code": "NOT_FOUND", "message": "no such route", "details": []}})
        browser.refresh()
        wait_for(browser, lambda: "not available" in text_of(browser, "#timeline-status"))
        assert not find_all(browser, "#timeline [data-outcome]") and not find_all(browser, "tr.occurrence")
        assert len(wait_for(browser, lambda: find_all(browser, "#next-fires li"))) == 10
        assert text_of(browser, "#status") == ""  # not an error of the page
    finally:
        proxy.stop()


def test_a_frequent_jobs_ledger_table_shows_the_past_newest_first_a_page_at_a_time(stack, browser, tmp_path):  # noqa: F811
    # An every-minute job: six hours of past (every seventh skipped, OVERLAP) and an hour of future
    shots = screenshots(tmp_path)
    job = call(stack, "POST", "/v1/jobs", {"name": "every-minute", "type": "CRON", "schedule": "* * * * *",
                                           "target": FAILING}, key="k3")
    now = datetime.now(timezone.utc).replace(second=0, microsecond=0)
    def at(minutes):
        return (now + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")
    ledger = [{"scheduledAt": at(m), "outcome": "SKIPPED", "reason": "OVERLAP", "executionId": None, "lateMs": None,
               "status": None} if m % 7 == 0 else
              {"scheduledAt": at(m), "outcome": "FIRED", "reason": None, "executionId": f"{job['jobId']}.{m}",
               "lateMs": 120, "status": "SUCCEEDED"} for m in range(-359, 0)]
    ledger += [{"scheduledAt": at(m), "outcome": "PENDING", "reason": None, "executionId": None, "lateMs": None,
                "status": None} for m in range(1, 61)]
    proxy = ApiProxy(stack.api_url)
    proxy.routes[rf"/v1/jobs/{job['jobId']}/occurrences"] = ledger_route(ledger)
    past = [o for o in ledger if o["outcome"] != "PENDING"][::-1]

    def shown():
        return [r.get_attribute("data-outcome") + " " + r.find_elements("css selector", "td a, td")[-1].text
                for r in find_all(browser, "tr.occurrence")]

    def expected(rows):
        return [o["outcome"] + " " + (o["executionId"] or "") for o in rows]

    try:
        sign_in(browser, proxy.url, "k3", "job/" + job["jobId"])
        # Then the table starts at the newest past occurrence, skips among the fires, no PENDING
        wait_for(browser, lambda: shown() == expected(past[:50]))
        assert text_of(browser, "#occurrences-upcoming") == "60 pending in the window; the next due " + at(1)
        assert "SKIPPED" in [r.split()[0] for r in shown()]
        browser.execute_script("document.getElementById('occurrences-table').scrollIntoView()")
        browser.save_screenshot(str(shots / "console-ledger-frequent.png"))
        # Older pages back, Newer returns
        find(browser, "#ledger-older").click()
        wait_for(browser, lambda: shown() == expected(past[50:100]))
        find(browser, "#ledger-older").click()
        wait_for(browser, lambda: shown() == expected(past[100:150]))
        find(browser, "#ledger-newer").click()
        wait_for(browser, lambda: shown() == expected(past[50:100]))
        find(browser, "#ledger-newer").click()
        wait_for(browser, lambda: shown() == expected(past[:50]))
        assert find(browser, "#ledger-newer").get_attribute("disabled") is not None
        browser.execute_script("document.getElementById('ledger-pager').scrollIntoView()")
        browser.save_screenshot(str(shots / "console-ledger-pager.png"))
        # Each page is a few requests of the route's windows, not the whole six hours
        assert len(proxy.seen) < 40
    finally:
        proxy.stop()


def test_a_workflow_run_is_drawn_as_its_dag_with_each_steps_state(stack, browser, echo, tmp_path):  # noqa: F811
    shots = screenshots(tmp_path)
    ok = {"type": "HTTP", "url": echo.url + "/step"}
    job = call(stack, "POST", "/v1/jobs", {"name": "nightly-etl", "type": "CRON", "schedule": "0 2 * * *",
                                           "retryPolicy": ONCE, "steps": [
                                               {"name": "extract", "target": ok},
                                               {"name": "transform", "target": ok, "dependsOn": ["extract"]},
                                               {"name": "report", "target": FAILING, "dependsOn": ["extract"]},
                                               {"name": "load", "target": ok, "dependsOn": ["transform", "report"]}]},
               key="k4")
    run = call(stack, "POST", f"/v1/jobs/{job['jobId']}/trigger", key="k4")
    ended = wait_until(lambda: (lambda e: e if e["status"] in ENDED else None)(
        call(stack, "GET", f"/v1/executions/{run['executionId']}", key="k4")))
    assert {s["name"]: s["status"] for s in ended["steps"]} == {
        "extract": "SUCCEEDED", "transform": "SUCCEEDED", "report": "DEAD", "load": "UPSTREAM_FAILED"}

    sign_in(browser, stack.api_url, "k4", "execution/" + run["executionId"])
    nodes = wait_for(browser, lambda: len(find_all(browser, "#execution-dag .dag-node")) == 4
                     and find_all(browser, "#execution-dag .dag-node"))
    states = {n.get_attribute("data-step"): n.get_attribute("data-status") for n in nodes}
    assert states == {s["name"]: s["status"] for s in ended["steps"]}
    # Drawn left to right in dependency order, one edge per dependsOn
    x = {n.get_attribute("data-step"): n.rect["x"] for n in nodes}
    assert x["extract"] < x["transform"] == x["report"] < x["load"]
    edges = {(e.get_attribute("data-from"), e.get_attribute("data-to")) for e in find_all(browser, "#execution-dag .edge")}
    assert edges == {("extract", "transform"), ("extract", "report"), ("transform", "load"), ("report", "load")}
    assert text_of(browser, "#execution-status") == "DEAD"
    browser.save_screenshot(str(shots / "console-workflow.png"))

    # The job's page draws its newest run the same way
    browser.get(stack.api_url + "/console#job/" + job["jobId"])
    wait_for(browser, lambda: {n.get_attribute("data-step"): n.get_attribute("data-status")
                               for n in find_all(browser, "#job-dag .dag-node")} == states)

    # A container job's execution shows its task, the container's exit code and its logs
    setup = stack.container_setup
    task_job = call(stack, "POST", "/v1/jobs", {
        "name": "container-report", "type": "DELAYED", "delaySeconds": 1, "retryPolicy": ONCE,
        "target": {"type": "ECS_TASK", "cluster": setup["cluster"], "container": "main",
                   "taskDefinition": "arn:aws:ecs:us-east-1:123456789012:task-definition/local-tenant-4:1",
                   "subnets": [setup["subnet"]], "securityGroups": [setup["securityGroup"]],
                   "command": ["sh", "-c", "echo rows=0; exit 2"]}}, key="k4")
    dead = wait_until(lambda: [e for e in executions(stack, task_job["jobId"], "k4") if e["status"] == "DEAD"])
    shown = call(stack, "GET", f"/v1/executions/{dead[0]['executionId']}", key="k4")
    browser.get(stack.api_url + "/console#execution/" + shown["executionId"])
    wait_for(browser, lambda: find_all(browser, "#execution-exit-code"))
    assert text_of(browser, "#execution-exit-code") == "2"
    assert text_of(browser, "#execution-task") == shown["task"]["taskArn"]
    assert text_of(browser, "#execution-logs") == shown["task"]["logUrl"]  # a local file: shown, not linked
    assert text_of(browser, "#execution-stopped") == "Essential container in task exited"
    browser.save_screenshot(str(shots / "console-container-task.png"))


def test_the_job_form_previews_fires_in_both_zones_and_shows_errors_by_field(stack, browser, tmp_path):  # noqa: F811
    shots = screenshots(tmp_path)
    # The viewer is in New York; the job runs on Paris time
    browser.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": "America/New_York"})
    try:
        sign_in(browser, stack.api_url, "k5", "new")
        wait_for(browser, lambda: text_of(browser, "#form-title") == "New job")
        find(browser, "#f-name").send_keys("paris-morning-report")
        zone = find(browser, "#f-timezone")
        zone.clear()
        zone.send_keys("Europe/Paris")
        find(browser, "#f-schedule").send_keys("0 9 * * 1-5")
        expected = call(stack, "GET", "/v1/schedule-preview?type=CRON&timezone=Europe/Paris&count=5&schedule="
                        + "0%209%20*%20*%201-5", key="k5")["fireTimes"]
        rows = wait_for(browser, lambda: [r.get_attribute("data-at") for r in find_all(browser, "tr.preview-fire")]
                        == expected and find_all(browser, "tr.preview-fire"))
        first = [c.text for c in rows[0].find_elements("css selector", "td")]
        assert re.search(r"09:00:00 (CET|CEST|GMT\+[12])\Z", first[0])
        assert re.search(r"0[23]:00:00 (EST|EDT|GMT-[45])\Z", first[1])
        assert re.fullmatch(r"in \d+ (min|h|days)", first[2])
        assert text_of(browser, "#preview-zones") == "(Europe/Paris and yours, America/New_York)"

        # A schedule the API refuses: its message by the schedule field, no fires shown
        find(browser, "#f-schedule").send_keys(Keys.END + "x")
        wait_for(browser, lambda: text_of(browser, "[data-error-for='schedule']") != "")
        assert not find_all(browser, "tr.preview-fire")
        browser.save_screenshot(str(shots / "console-job-form-error.png"))
        find(browser, "#f-schedule").send_keys(Keys.BACKSPACE)
        wait_for(browser, lambda: len(find_all(browser, "tr.preview-fire")) == 5)
        assert text_of(browser, "[data-error-for='schedule']") == ""
        browser.save_screenshot(str(shots / "console-job-form.png"))

        # Create with a target that has no url: the API's error stands by the field it names
        find(browser, "#f-target").send_keys('{"type": "HTTP"}')
        find(browser, "#save-job").click()
        assert "url" in wait_for(browser, lambda: text_of(browser, "[data-error-for='target']"))
        assert browser.execute_script("return location.hash") == "#new"  # nothing created
        find(browser, "#f-target").clear()
        find(browser, "#f-target").send_keys('{"type": "HTTP", "url": "http://127.0.0.1:9/report"}')
        find(browser, "#save-job").click()
        wait_for(browser, lambda: browser.execute_script("return location.hash").startswith("#job/"))
        job_id = browser.execute_script("return decodeURIComponent(location.hash.slice(5))")
        assert wait_for(browser, lambda: text_of(browser, "#status")) == "Created paris-morning-report."
        created = call(stack, "GET", f"/v1/jobs/{job_id}", key="k5")
        assert (created["name"], created["schedule"], created["timezone"], created["version"]) == (
            "paris-morning-report", "0 9 * * 1-5", "Europe/Paris", 1)
        fires = wait_for(browser, lambda: find_all(browser, "#next-fires li"))
        assert fires[0].get_attribute("data-at") == expected[0]
        assert re.fullmatch(r"in \d+ (min|h|days)", fires[0].find_element("css selector", ".relative").text)

        # Edit: the form holds the job; a new schedule previews, and saves as version 2
        wait_for(browser, lambda: find(browser, "#edit-job").get_attribute("href").endswith("#edit/" + job_id))
        find(browser, "#edit-job").click()
        wait_for(browser, lambda: find(browser, "#f-schedule").get_attribute("value") == "0 9 * * 1-5")
        assert text_of(browser, "#form-title") == "Edit paris-morning-report"
        schedule = find(browser, "#f-schedule")
        schedule.clear()
        schedule.send_keys("30 7 * * *")
        wait_for(browser, lambda: all("07:30:00" in r.find_element("css selector", ".zone-job").text
                                      for r in find_all(browser, "tr.preview-fire")) and find_all(browser, "tr.preview-fire"))
        find(browser, "#save-job").click()
        wait_for(browser, lambda: call(stack, "GET", f"/v1/jobs/{job_id}", key="k5")["version"] == 2)
        assert call(stack, "GET", f"/v1/jobs/{job_id}", key="k5")["schedule"] == "30 7 * * *"

        # An edit over a version someone else has replaced since the form opened: refused (409), not applied
        wait_for(browser, lambda: text_of(browser, "#job-name") == "paris-morning-report"
                 and browser.execute_script("return location.hash") == "#job/" + job_id)
        browser.execute_script("location.hash = arguments[0]", "edit/" + job_id)
        wait_for(browser, lambda: find(browser, "#f-schedule").get_attribute("value") == "30 7 * * *")
        meanwhile = dict(call(stack, "GET", f"/v1/jobs/{job_id}", key="k5"), schedule="45 6 * * *")
        call(stack, "PUT", f"/v1/jobs/{job_id}", {k: meanwhile[k] for k in (
            "name", "type", "schedule", "timezone", "target", "retryPolicy", "priority")}, key="k5")
        schedule = find(browser, "#f-schedule")
        schedule.clear()
        schedule.send_keys("15 8 * * *")
        find(browser, "#save-job").click()
        assert wait_for(browser, lambda: find(browser, "#status").get_attribute("class") == "error"
                        and text_of(browser, "#status"))
        after = call(stack, "GET", f"/v1/jobs/{job_id}", key="k5")
        assert (after["schedule"], after["version"]) == ("45 6 * * *", 3)
        assert browser.execute_script("return location.hash") == "#edit/" + job_id  # the edit stays in the form
    finally:
        browser.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": ""})


def test_console_nits_actions_a_job_takes_a_kept_redrive_message_axis_labels_and_an_icon(stack, browser, tmp_path):  # noqa: F811
    import urllib.request

    shots = screenshots(tmp_path)
    # A one-off job is offered no Pause (the API would answer 409), only what it takes
    once = call(stack, "POST", "/v1/jobs", {"name": "once", "type": "DELAYED", "delaySeconds": 3600,
                                            "target": FAILING}, key="k6")
    sign_in(browser, stack.api_url, "k6", "job/" + once["jobId"])
    wait_for(browser, lambda: text_of(browser, "#job-name") == "once")
    shown = {b: find(browser, "#" + b).is_displayed() for b in ("run-now", "pause", "resume", "cancel")}
    assert shown == {"run-now": True, "pause": False, "resume": False, "cancel": True}
    assert not find(browser, "#pause-reason").is_displayed()
    # The page names its icon, which is served (no 404 for /favicon.ico)
    icon = browser.execute_script("return document.querySelector('link[rel=icon]').href")
    with urllib.request.urlopen(icon, timeout=10) as response:
        assert response.status == 200 and response.headers["Content-Type"] == "image/svg+xml"
    # A value axis of seven digits fits its margin
    fits = browser.execute_script("""
        const box = document.createElement('div'); document.body.appendChild(box);
        drawChart(box, 0, 3600000, 600000, [{name: 'p99', kind: 'line', points: new Map([[0, 1294063]])}]);
        const labels = [...box.querySelectorAll('text.tick[text-anchor=end]')].filter((t) => !t.textContent.includes(':'));  // the value axis (a time label at the edge also ends there)
        const out = labels.map((t) => [t.textContent, t.getBBox().x]); box.remove(); return out;""")
    assert fits[-1][0] == "2M" and all(x >= 0 for _, x in fits), fits
    # A redrive's message stays after the list is read again
    dead = call(stack, "POST", "/v1/jobs", {"name": "dies", "type": "DELAYED", "delaySeconds": 1, "target": FAILING,
                                            "retryPolicy": ONCE}, key="k6")
    wait_until(lambda: call(stack, "GET", "/v1/dead-letters", key="k6")["items"])
    browser.get(stack.api_url + "/console#dead")
    button = wait_for(browser, lambda: find_all(browser, "#dead-table button"))[0]
    button.click()
    wait_for(browser, lambda: text_of(browser, "#status").startswith("Redriven: " + dead["jobId"]))
    time.sleep(1)  # the wall clock of a real browser: still there a second later
    assert text_of(browser, "#status").startswith("Redriven: " + dead["jobId"])
    browser.save_screenshot(str(shots / "console-redriven.png"))
