"""The worker's "attempt" log line: every outcome but an on-time success is always logged; a
succeeded attempt is logged for a chosen percent of execution ids (handlers/worker.py)."""
import pytest

from jobsched.handlers.worker import LOG_LATE_MS, logs_attempt
from jobsched.service.outcomes import Outcome
from jobsched.settings import FUNCTION_ENV, Env, Settings

IDS = [f"job_{i:032x}.2030-01-01T00:{i % 60:02d}:00Z" for i in range(4000)]


@pytest.mark.parametrize("outcome", [o for o in Outcome if o is not Outcome.SUCCEEDED])
def test_every_outcome_but_success_is_logged_whatever_the_percent(outcome):
    assert all(logs_attempt(outcome, execution_id, 0, 0) for execution_id in IDS[:50])


def test_a_succeeded_attempt_over_a_second_late_is_always_logged():
    assert all(logs_attempt(Outcome.SUCCEEDED, execution_id, LOG_LATE_MS + 1, 0) for execution_id in IDS[:50])
    assert not any(logs_attempt(Outcome.SUCCEEDED, execution_id, LOG_LATE_MS, 0) for execution_id in IDS[:50])


@pytest.mark.parametrize("percent", [1, 10, 50])
def test_successes_are_sampled_at_about_the_percent_and_by_execution_id(percent):
    logged = [i for i in IDS if logs_attempt(Outcome.SUCCEEDED, i, 20, percent)]
    assert 0.5 * percent / 100 <= len(logged) / len(IDS) <= 1.5 * percent / 100
    # The choice is the execution's, not the attempt's: the same id is logged every time
    assert logged == [i for i in IDS if logs_attempt(Outcome.SUCCEEDED, i, None, percent)]


def test_at_100_percent_every_success_is_logged_and_that_is_the_default_without_the_variable():
    assert all(logs_attempt(Outcome.SUCCEEDED, i, 0, 100) for i in IDS)
    env = {name: "x" for name in FUNCTION_ENV["worker"]} | {Env.SEGMENTS: "1", Env.EXECUTION_RETENTION_DAYS: "30"}
    assert Settings.from_env(env, "worker").attempt_log_percent == 100
    assert Settings.from_env(env | {Env.ATTEMPT_LOG_PERCENT: "0"}, "worker").attempt_log_percent == 0
