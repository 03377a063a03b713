"""Issue 25's proof, small: three regions on the real handlers (bench/regions.py's scenario, the
quick plan), one killed with its unreplicated writes lost, another cut off the ownership table
while it keeps running, then healed. Nothing due is lost, nothing runs twice under one lease
epoch, and the failed regions' jobs run elsewhere within a minute plus the lease."""
from __future__ import annotations

import math

from bench.regions import MINUTE, QUICK, run


def test_a_region_lost_and_one_partitioned_lose_no_fire_and_run_none_twice_in_an_epoch(template, monkeypatch):
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    outcome = run(QUICK, template)
    assert outcome.expected >= 60 and outcome.lost_writes > 0  # the kill did lose unreplicated writes
    assert outcome.lost == []
    assert outcome.twice_in_an_epoch == [] and outcome.after_a_newer_epoch == []
    bound_s = (MINUTE + QUICK.lease_ms + QUICK.clock_bound_ms) / 1000 + 2
    for event, waited in outcome.failover_s.items():
        assert not math.isnan(waited) and 0 < waited <= bound_s, (event, waited)
    # Every occurrence after the heal ran on time again (the partitioned region got its segments back).
    after = outcome.lateness["after heal"]
    assert after and max(after) < 1_000
