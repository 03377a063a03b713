"""bench lateness: lateness by due time, to tell a backlog that grows over the run from a burst."""
from bench.lateness import PHASE_SECONDS, by_phase


def test_windows_follow_due_time_and_a_growing_backlog_shows_in_the_later_ones():
    first = 1_000
    late_by_due = [((first + s) * 1000 + i, 100 + 50 * s) for s in range(60) for i in range(5)]
    windows = by_phase(late_by_due, first, 60)
    assert [(w[0], w[1], w[2]) for w in windows] == [(0, 20, 100), (20, 40, 100), (40, 60, 100)]
    assert windows[0][5] == 100 + 50 * (PHASE_SECONDS - 1) and windows[2][5] == 100 + 50 * 59
    assert windows[0][4] < windows[1][4] < windows[2][4]


def test_a_short_run_is_one_window_and_jobs_outside_the_run_are_left_out():
    windows = by_phase([(5_000, 10), (5_500, 20), (99_000, 999)], 5, 10)
    assert [(w[0], w[1], w[2]) for w in windows] == [(0, 10, 2)]
