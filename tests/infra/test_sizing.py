"""The sizing rule (jobsched/sizing.py) is computed from the code's own constants, and the
documented figures are the rule's."""
import re
from pathlib import Path

import bench.cpu
from jobsched import sizing
from jobsched.service.handoff import LOOK_AHEAD_MINUTES
from jobsched.store import dynamo
from jobsched.store import timers as timers_store

ROOT = Path(__file__).resolve().parents[2]


def test_the_rule_uses_the_constants_the_code_runs_with(template):
    tick = next(r["Properties"] for r in template["Resources"].values()
                if r["Type"] == "AWS::Lambda::Function"
                and r["Properties"]["Handler"] == "jobsched.handlers.tick.handler")
    assert tick["MemorySize"] == sizing.TICK_MEMORY_MB
    assert sizing.TICK_CPU_MS_PER_TIMER == bench.cpu.BOUND_TICK_MS  # the bound `bench cpu` checks
    assert sizing.PAGE_SIZE == timers_store.TimersStore.__init__.__defaults__[0]
    assert dynamo.GET_PARALLELISM * dynamo.BATCH_GET_LIMIT >= sizing.PAGE_SIZE  # one wave of job reads a page
    # The look-ahead leaves at least a minute; the goal leaves room for a minute twice as busy.
    assert (LOOK_AHEAD_MINUTES - 1) * 60 >= 2 * sizing.HANDOFF_GOAL_S
    assert tick["Timeout"] >= 2 * sizing.HANDOFF_GOAL_S


def test_the_rule_hands_a_segment_off_within_the_goal_at_its_own_peak():
    per_segment = sizing.timers_per_segment_minute()
    assert per_segment * sizing.handoff_ms_per_timer() <= sizing.HANDOFF_GOAL_S * 1000
    assert (per_segment + 100) * sizing.handoff_ms_per_timer() > sizing.HANDOFF_GOAL_S * 1000
    for jobs_per_minute in (1, 10_000, 600_000, 1_000_000):
        segments = sizing.segments_for(jobs_per_minute)
        assert jobs_per_minute / segments <= per_segment and segments <= sizing.MAX_SEGMENTS


def test_the_documented_figures_are_the_rules():
    text = (ROOT / "docs" / "operations.md").read_text()
    figures = {int(n.replace(",", "")): int(s) for n, s in
               re.findall(r"([\d,]+) jobs/min → (\d+) segments", text)}
    assert figures, "docs/operations.md lists the rule worked through"
    for jobs_per_minute, segments in figures.items():
        assert sizing.segments_for(jobs_per_minute) == segments, jobs_per_minute
    assert f"{sizing.timers_per_segment_minute():,} timers" in text
