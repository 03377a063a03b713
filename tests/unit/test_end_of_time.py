"""No fire passes the end of time, jitter included, and a preview near it answers correctly."""
import pytest

from jobsched.api.answers import next_fire_at, preview_schedule
from jobsched.api.mapping import to_spec
from jobsched.api.models import JobRequest
from jobsched.domain.errors import UnprocessableRequest
from jobsched.domain.jobs import Job, JobState, jitter_offset_ms
from jobsched.domain.schedule import END_OF_TIME_MS, parse_instant

JOB_ID = "job_end"


def at(text: str) -> int:
    return parse_instant(text, "t")


def request(**fields) -> JobRequest:
    return JobRequest.model_validate({"name": "n", "target": {"type": "HTTP", "url": "https://example.com/"},
                                      **fields})


@pytest.mark.parametrize("fields", [
    {"type": "CRON", "schedule": "0 * * * *"},
    {"type": "RATE", "schedule": "PT1H", "startAt": "9998-12-31T19:00:00Z"},
])
def test_every_fire_of_a_jittered_job_near_the_end_of_time_is_before_it(fields):
    # Given a job whose jitter moves each fire most of an hour after its occurrence
    assert jitter_offset_ms(JOB_ID, 3600) > 60_000
    now = at("9998-12-31T18:30:00Z")
    spec = to_spec(request(jitterSec=3600, **fields), now)
    job = Job("tenant", JOB_ID, spec, JobState.ACTIVE, 1, 1, now, now)
    # When every next fire is computed to the end
    fires, cursor = [], now
    while (fire := next_fire_at(job, cursor)) is not None and len(fires) < 50:
        fires.append(fire)
        cursor = fire + 1
    # Then some fire, and none passes the end of time
    assert fires and max(fires) <= END_OF_TIME_MS


def test_a_one_time_job_whose_jitter_would_pass_the_end_of_time_is_refused():
    with pytest.raises(UnprocessableRequest) as caught:
        to_spec(request(type="ONE_TIME", runAt="9999-01-01T00:00:00Z", jitterSec=60), at("9998-12-31T23:59:00Z"))
    assert caught.value.details[0].field == "jitterSec"


def test_a_preview_near_the_end_of_time_lists_what_is_left_instead_of_saying_never():
    assert preview_schedule("CRON", "0 0 1 1 *", "UTC", 5, at("9998-06-01T00:00:00Z")) == []
    assert len(preview_schedule("CRON", "0 * * * *", "UTC", 100, at("9998-12-31T20:30:00Z"))) <= 3
    with pytest.raises(UnprocessableRequest):  # an expression that matches no date still says so
        preview_schedule("CRON", "0 0 30 2 *", "UTC", 5, at("2026-01-01T00:00:00Z"))
