"""The local stack's lanes: as many worker containers as the template's lane caps, so that one
tenant's lane share is the deployment's. One-time jobs created through the API inside the
look-ahead are each sent on their own, so a second of them arrives as one-record batches, each in
a container of its own, all running at the due second."""
import threading

from jobsched.domain.executions import AttemptOutcome, ExecutionStatus
from jobsched.domain.jobs import Priority
from jobsched.handlers import worker as worker_handler
from jobsched.local.events import Function, LanePoller
from jobsched.local.runtime import LaneContainers, Options, SharedClients, local_lanes
from jobsched.settings import Env

HOOK = {"type": "HTTP", "url": "http://127.0.0.1:9/hook"}
BATCHES = 20  # one-record batches of one tenant running at once (a lane of 8 gives it 4)


class TogetherTarget:
    """Answers once every expected call has arrived (or after a few seconds), so that each call
    holds its container, and its lane-share slot, until all are running at once."""

    def __init__(self, expected: int) -> None:
        self.calls: list[str] = []
        self._lock = threading.Lock()
        self._all_in = threading.Barrier(expected)

    def invoke(self, job, dispatch, attempt, callback_token=None, progress=None) -> AttemptOutcome:
        with self._lock:
            self.calls.append(dispatch.execution_id)
        try:
            self._all_in.wait(timeout=5)
        except threading.BrokenBarrierError:
            pass
        return AttemptOutcome(True, ExecutionStatus.SUCCEEDED, None, {"ok": True})


def test_a_second_of_one_tenants_one_record_batches_runs_at_once_in_the_local_lane(harness):
    # Given BATCHES one-time jobs of one tenant, handed off and due, their messages received one a batch
    jobs = [harness.create_job({"name": f"one-{i}", "type": "DELAYED", "delaySeconds": 90, "target": HOOK})
            for i in range(BATCHES)]
    harness.advance(60)
    harness.clock.set_ms(harness.clock.now_ms() + 40_000)
    url = harness.envs["worker"][Env.LANE_URL[Priority.NORMAL]]
    messages = []
    while batch := harness.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        messages += batch
    assert len(messages) == len(jobs)
    # And the NORMAL lane's containers as the local stack makes them
    env, containers_per_lane = local_lanes(harness.envs["worker"], Options().containers_per_lane)
    target = TogetherTarget(BATCHES)
    session = SharedClients(harness.session)
    lane = LaneContainers(lambda: Function("worker", worker_handler.make_handler(env, harness.clock, session, target)),
                          containers_per_lane[Priority.NORMAL])
    poller = LanePoller(harness.sqs, [url], lane.first())
    stop = threading.Event()
    taken = [lane.acquire(stop) for _ in messages]
    assert all(container is not None for container in taken), "the lane ran out of containers"

    # When every batch runs in its own container at once
    runs = [threading.Thread(target=poller.handle, args=(url, [message], container))
            for message, container in zip(messages, taken)]
    for run in runs:
        run.start()
    for run in runs:
        run.join(30)

    # Then no record was held back by its tenant's lane share: every job's target was called, once
    assert sorted(target.calls) == sorted({call for call in target.calls})
    assert len(target.calls) == BATCHES
