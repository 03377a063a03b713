"""Catch-up that does not flood, in the console (a real browser): a job's page shows its misfire
policy, the object form with its bounds, the string form as before."""
from .console_support import (  # noqa: F401 - the fixtures
    _strict_layer_for_each_test, browser, call, find_all, screenshots, sign_in, stack, text_of, wait_for)

TARGET = {"type": "HTTP", "url": "http://127.0.0.1:9/x"}


def open_job(browser, name):  # noqa: F811
    """Click the job's link on the jobs list, then wait for its page."""
    browser.execute_script("location.hash = 'jobs'")

    def click():
        for link in find_all(browser, "a.job-link"):
            if link.text == name:
                link.click()
                return True
        return False
    wait_for(browser, click)
    wait_for(browser, lambda: text_of(browser, "#job-name") == name)


def test_the_job_page_shows_the_catch_up_policy(stack, browser, tmp_path):  # noqa: F811
    shots = screenshots(tmp_path)
    call(stack, "POST", "/v1/jobs", {"name": "every-minute", "type": "RATE", "schedule": "PT1M", "target": TARGET,
                                     "misfirePolicy": {"policy": "RUN_ALL", "maxCatchUp": 100,
                                                       "catchUpPerMinute": 10}})
    call(stack, "POST", "/v1/jobs", {"name": "plain", "type": "RATE", "schedule": "PT1M", "target": TARGET,
                                     "misfirePolicy": "SKIP"})
    sign_in(browser, stack.api_url, "k1", "jobs")
    open_job(browser, "every-minute")
    assert wait_for(browser, lambda: text_of(browser, "#job-misfire-policy")) == (
        "RUN_ALL: the newest 100 missed run, 10 a minute; older ones are skipped (MISSED_WINDOW)")
    browser.save_screenshot(str(shots / "console-job-catch-up.png"))
    open_job(browser, "plain")
    assert wait_for(browser, lambda: text_of(browser, "#job-misfire-policy")) == "SKIP"  # the string form, as before
