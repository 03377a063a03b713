"""The local stack's snapshots take a bounded share of its time however large its state grows."""
from jobsched.local.state import SNAPSHOT_PAUSE_FACTOR, SNAPSHOT_SECONDS, snapshot_pause


def test_a_quick_snapshot_is_followed_by_the_one_second_pause():
    assert snapshot_pause(0.001) == SNAPSHOT_SECONDS == 1.0


def test_a_slow_snapshot_waits_long_enough_to_stay_within_a_tenth_of_the_time():
    for took in (0.2, 0.5, 3.0):
        pause = snapshot_pause(took)
        assert pause >= SNAPSHOT_SECONDS
        assert took / (took + pause) <= 1 / (1 + SNAPSHOT_PAUSE_FACTOR) + 1e-9 == 0.1 + 1e-9
