"""Schedule bounds and self-pausing on the console's job page, in a real browser against the local
stack: runs out of maxRuns, startAt and endAt, the preview kept inside them, why a job completed and
why it paused itself. Screenshots go to $JOBSCHED_SCREENSHOTS, else a temp dir."""
import time

from jobsched.domain.schedule import format_instant

from .console_support import (  # noqa: F401 - fixtures shared with the console's other tests
    _strict_layer_for_each_test, browser, call, find_all, screenshots, sign_in, stack, text_of, wait_for)

FAILING = {"type": "HTTP", "url": "http://127.0.0.1:9/x"}  # nothing listens: every attempt fails
ONCE = {"maxAttempts": 1, "backoff": "FIXED", "initialDelayMs": 1000, "maxDelayMs": 1000}


def wait_for_state(runtime, job_id, state, seconds=90.0):
    """The local stack runs on the wall clock: its tick and workers fire the job for real."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        job = call(runtime, "GET", f"/v1/jobs/{job_id}")
        if job["state"] == state:
            return job
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} is {job['state']}, not {state}, after {seconds} s")


def open_job(browser, runtime, job_id):  # noqa: F811
    """The job's page (#job/<id>), once its details and next fires are drawn."""
    browser.get(runtime.api_url + "/console#job/" + job_id)
    wait_for(browser, lambda: browser.execute_script("return document.getElementById('job-view').dataset.jobId")
             == job_id and find_all(browser, "#job-state"))


def instant(browser, css):  # noqa: F811
    """The instant a <time> element shows (its text is local and relative)."""
    found = find_all(browser, css + " time")
    return found[0].get_attribute("datetime") if found else None


def test_the_job_page_shows_runs_bounds_and_why_a_job_completed_or_paused(stack, browser, tmp_path):  # noqa: F811
    shots = screenshots(tmp_path)
    now_ms = int(time.time() * 1000)
    start, end = format_instant(now_ms + 3_600_000 - now_ms % 1000), format_instant(now_ms + 30 * 3_600_000)
    bounded = call(stack, "POST", "/v1/jobs", {"name": "bounded", "type": "RATE", "schedule": "PT1H", "target": FAILING,
                                     "startAt": start, "endAt": end, "maxRuns": 3, "pauseAfterFailures": 5})
    done = call(stack, "POST", "/v1/jobs", {"name": "two-runs", "type": "RATE", "schedule": "PT1S",
                                            "target": FAILING, "retryPolicy": ONCE, "maxRuns": 2})
    failing = call(stack, "POST", "/v1/jobs", {"name": "self-paused", "type": "RATE", "schedule": "PT2S",
                                               "target": FAILING, "retryPolicy": ONCE, "pauseAfterFailures": 2})

    # An ACTIVE job with bounds: its runs, its bounds, and next fires inside them (maxRuns of them).
    sign_in(browser, stack.api_url, "k1")
    open_job(browser, stack, bounded["jobId"])
    assert text_of(browser, "#job-runs") == "0 of 3"
    assert instant(browser, "#job-start-at") == start and instant(browser, "#job-end-at") == end
    assert text_of(browser, "#job-pause-after-failures") == "5"
    fires = [li.get_attribute("data-at") for li in wait_for(browser, lambda: find_all(browser, "#next-fires li"))]
    assert len(fires) == 3 and fires[0] == start
    browser.save_screenshot(str(shots / "console-job-bounds.png"))

    # A job that used up its two runs: COMPLETED, and why.
    completed = wait_for_state(stack, done["jobId"], "COMPLETED")
    assert (completed["completedReason"], completed["runCount"]) == ("MAX_RUNS_REACHED", 2)
    open_job(browser, stack, done["jobId"])
    assert text_of(browser, "#job-state") == "COMPLETED"
    assert text_of(browser, "#job-completed-reason") == "MAX_RUNS_REACHED"
    assert text_of(browser, "#job-runs") == "2 of 2"
    browser.save_screenshot(str(shots / "console-job-completed.png"))

    # A job that paused itself after two executions ended DEAD: the reason names the last one.
    paused = wait_for_state(stack, failing["jobId"], "PAUSED")
    assert paused["pausedReason"].startswith("paused after 2 consecutive executions ended DEAD; the last: "
                                             + failing["jobId"] + ".")
    open_job(browser, stack, failing["jobId"])
    assert text_of(browser, "#job-paused-reason") == paused["pausedReason"]
    browser.save_screenshot(str(shots / "console-job-self-paused.png"))
