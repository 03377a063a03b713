"""Each benchmark runs on a tiny input and prints its table (figures are not asserted: they are
measurements, recorded in docs/performance.md)."""
import dataclasses
import os
import re

import pytest

import bench.api
import bench.clients
import bench.cost
import bench.dispatch
import bench.fairness
import bench.herd
import bench.lanes
import bench.lateness
import bench.scale
import bench.sizing


@pytest.fixture(autouse=True)
def restore_environment():
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


# Jobs per scenario of `bench cost` here: a batch of ten records still fills, a pack still forms.
TINY_JOBS = 10


@pytest.mark.parametrize("module,heading", [
    (bench.dispatch, "Dispatch throughput"),
    (bench.herd, "Hand-off of one segment's bucket"),
    (bench.cost, "Modelled cost per million executions"),
    (bench.scale, "One tick, counted"),
    (bench.api, "Create job"),
    (bench.fairness, "Small tenant's lateness"),
    (bench.lateness, "Lateness of the target call"),
    (bench.lanes, "B's lateness beside a slow partner"),
    (bench.sizing, "What it deploys"),
    (bench.clients, "Target clients of one worker process"),
])
def test_benchmark_runs_on_a_tiny_input(module, heading, capsys, monkeypatch):
    if module is bench.cost:
        # `--quick`'s scenarios (the figures docs/performance.md quotes) with at most TINY_JOBS jobs
        # each: every scenario still runs its phases (idle, creates, settle, fires), in seconds.
        monkeypatch.setattr(bench.cost, "SCENARIOS_QUICK", [dataclasses.replace(s, jobs=min(s.jobs, TINY_JOBS))
                                                            for s in bench.cost.SCENARIOS_QUICK])
    module.main(["--quick"])
    out = capsys.readouterr().out
    assert heading in out
    lines = out[out.index(heading):].splitlines()
    assert len(lines) >= 4 and set(lines[2].replace(" ", "")) == {"-"}  # a header rule, then rows
    if module is bench.lateness and os.path.exists("/proc/self/stat"):
        assert "CPU while they fired, a job: the stack's process" in out  # both processes' CPU per job
    if module is bench.cost:  # the tracing lever, and the quiet deployment with it, priced as deployed
        assert "X-Ray tracing on (-c tracing=on; off as deployed)" in out and "the same with -c tracing=on:" in out
        assert "A quiet deployment: one recurring execution a second for a month (USD), as deployed by default" in out


def test_the_cpu_benchmark_runs_the_real_handlers_on_a_tiny_input(capsys):
    import bench.cpu

    import os

    cores = os.sched_getaffinity(0)
    bench.cpu.main(["--timers=60", "--jobs=20", "--repeat=1"])
    out = capsys.readouterr().out
    assert "measured on one core" in out and os.sched_getaffinity(0) == cores  # pinned, then given back
    rows = {line.split("  ")[0]: line for line in out.splitlines() if line.startswith(("tick:", "worker:"))}
    # The worker runs packs as the tick sends them (20 jobs at the deployed fill, about 78: one pack
    # of 20), and messages of one (the per-execution path), each against the floor of its own requests.
    assert set(rows) == {"tick: per handed-off timer",
                         "worker: per executed job (recurring, packs of 20.0, as the tick sends them)",
                         "worker: per executed job (one-time, packs of 20.0, as the tick sends them)",
                         "worker: per executed job (recurring, messages of one: fires sent alone, retries, triggers)",
                         "worker: per executed job (one-time, messages of one: fires sent alone, retries, triggers)"}
    assert all(row.split()[-4].endswith("x") for row in rows.values())  # ours / floor
    assert "SendMessageBatch 0.100" in out  # 60 timers: six batches of ten


def test_the_cpu_benchmarks_worker_gets_the_messages_the_tick_sends():
    """Packs of a (segment, second) as LaneQueues.send builds them, or messages of one when sent alone."""
    from bench.cpu import DISPATCH_KEY, packed_jobs, tick_messages
    from jobsched.domain.dispatch_seal import DispatchSeal

    seal = DispatchSeal(bytes.fromhex(DISPATCH_KEY))
    jobs = packed_jobs(30, 10)
    packs = [seal.open_pack(body) for body in tick_messages(jobs, recurring=True)]
    assert [len(p.entries) for p in packs] == [10, 10, 10] and all(p.pack_id for p in packs)
    alone = [seal.open_pack(body) for body in tick_messages(jobs, recurring=True, alone=True)]
    assert len(alone) == 30 and all(p.pack_id is None for p in alone)


def test_the_end_to_end_benchmark_runs_the_real_tick_and_worker_on_a_tiny_input(template, capsys):
    """Given the test template, when the three scenarios run on a tiny input, then every fire is
    handed off by the real tick, run by the real worker, and measured: as many lateness samples as
    executions due, and the figures each scenario prints (partition peaks, lanes, a verdict)."""
    import bench.e2e

    bench.e2e.main(["--quick"], template=template)
    out = capsys.readouterr().out
    heading = "End to end lateness"
    lines = out[out.index(heading):].splitlines()
    assert set(lines[2].replace(" ", "")) == {"-"}
    rows = {line.split("  ")[0]: line.split() for line in lines[3:6]}
    assert set(rows) == {s.name for s in bench.e2e.QUICK}
    # Whole segments sampled: "2 of 2 segments" (the test template's), then the executions run.
    ran = [int(row[row.index("segments") + 1].replace(",", "")) for row in rows.values()]
    assert all(row[row.index("segments") - 3:row.index("segments")] == ["2", "of", "2"] for row in rows.values())
    assert ran == [20 * 60, 200, 20 * 60]  # every execution due in the window ran, once
    assert out.count("hottest partition keys") == 3 and out.count("verdict:") == 3
    assert re.search(r"\n    jobs: [\d,]+ RCU/s", out) and "assumptions:" in out  # the Jobs table billed
