"""Steps: a job whose fire runs a DAG of steps (a "run"), each step an execution of its own.

The run is the execution of the fire (its id is the occurrence's id); each step's execution id
is derived from the run's and the step's name, so every writer names the same step the same way
and a repeated dispatch of a step is a duplicate send that its claim absorbs."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from jobsched.domain.errors import UnprocessableRequest
from jobsched.domain.executions import ExecutionStatus
from jobsched.domain.retry import RetryPolicy

MAX_STEPS = 100
# Matched with fullmatch: `$` also matches before a final newline, which "extract\n" would pass.
STEP_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
STEP_SEPARATOR = ".step."
# A step that will not change again. UPSTREAM_FAILED: a step below a DEAD or CANCELLED one.
STEP_ENDED = frozenset({ExecutionStatus.SUCCEEDED, ExecutionStatus.DEAD, ExecutionStatus.CANCELLED,
                        ExecutionStatus.UPSTREAM_FAILED})


def step_execution_id(run_id: str, name: str) -> str:
    return f"{run_id}{STEP_SEPARATOR}{name}"


def step_of(execution_id: str) -> tuple[str, str] | None:
    """(run id, step name) of a step's execution id; None for any other execution."""
    run_id, separator, name = execution_id.rpartition(STEP_SEPARATOR)
    if not separator or not run_id or not STEP_NAME.fullmatch(name):
        return None
    return run_id, name


@dataclass(frozen=True)
class Step:
    name: str
    target: Any  # jobs.Target (not imported: jobs imports this module)
    depends_on: tuple[str, ...] = ()
    retry: RetryPolicy | None = None  # None: the job's
    timeout_sec: int | None = None  # None: the job's

    def to_item(self) -> dict:
        item: dict[str, Any] = {"name": self.name, "target": self.target.to_item()}
        if self.depends_on:
            item["dependsOn"] = list(self.depends_on)
        if self.retry is not None:
            item["retryPolicy"] = self.retry.to_item()
        if self.timeout_sec is not None:
            item["timeoutSec"] = self.timeout_sec
        return item


@dataclass(frozen=True)
class Workflow:
    """The steps of a job, checked to form a DAG (names unique, dependencies known, no cycle)."""

    steps: tuple[Step, ...]

    def __post_init__(self) -> None:
        check_dag(self.steps)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.steps]

    def step(self, name: str) -> Step | None:
        return next((s for s in self.steps if s.name == name), None)

    def roots(self) -> list[Step]:
        return [s for s in self.steps if not s.depends_on]

    def downstream(self, name: str) -> list[Step]:
        return [s for s in self.steps if name in s.depends_on]

    def below(self, name: str) -> list[Step]:
        """Every step that needs `name` to succeed, directly or through others (in DAG order)."""
        found: list[Step] = []
        frontier = [name]
        while frontier:
            current = frontier.pop(0)
            for step in self.downstream(current):
                if step not in found:
                    found.append(step)
                    frontier.append(step.name)
        return found

    def to_item(self) -> list[dict]:
        return [s.to_item() for s in self.steps]


def check_dag(steps: tuple[Step, ...]) -> None:
    """422 naming the problem: too many steps, a bad or duplicate name, an unknown dependency, or
    a cycle (its path, e.g. `extract -> load -> extract`)."""
    def problem(message: str) -> UnprocessableRequest:
        return UnprocessableRequest.for_field("steps", message)

    if not steps:
        raise problem("at least one step")
    if len(steps) > MAX_STEPS:
        raise problem(f"at most {MAX_STEPS} steps ({len(steps)} given)")
    names: set[str] = set()
    for step in steps:
        if not STEP_NAME.fullmatch(step.name):
            raise problem(f"step name {step.name[:80]!r} must be 1-64 of A-Z a-z 0-9 _ -")
        if step.name in names:
            raise problem(f"duplicate step name {step.name!r}")
        names.add(step.name)
    for step in steps:
        for upstream in step.depends_on:
            if upstream not in names:
                raise problem(f"step {step.name!r} depends on unknown step {upstream!r}")
            if list(step.depends_on).count(upstream) > 1:
                raise problem(f"step {step.name!r} names {upstream!r} twice in dependsOn")
    cycle = find_cycle({s.name: list(s.depends_on) for s in steps})
    if cycle:
        raise problem("cycle: " + " -> ".join(cycle))


def find_cycle(depends_on: dict[str, list[str]]) -> list[str] | None:
    """A cycle as a path that starts and ends at the same step, following dependsOn backwards
    (from a step to the one that depends on it), or None. Iterative: 100 steps never recurse."""
    downstream: dict[str, list[str]] = {name: [] for name in depends_on}
    for name, upstreams in depends_on.items():
        for upstream in upstreams:
            downstream[upstream].append(name)
    white, grey, black = 0, 1, 2
    colour = {name: white for name in depends_on}
    for start in depends_on:
        if colour[start] != white:
            continue
        path = [start]
        iterators = [iter(downstream[start])]
        colour[start] = grey
        while iterators:
            nxt = next(iterators[-1], None)
            if nxt is None:
                colour[path.pop()] = black
                iterators.pop()
                continue
            if colour[nxt] == grey:
                return path[path.index(nxt):] + [nxt]
            if colour[nxt] == white:
                colour[nxt] = grey
                path.append(nxt)
                iterators.append(iter(downstream[nxt]))
    return None


def step_body(payload: Any, upstream_outputs: dict[str, Any]) -> Any:
    """What a step's call carries: the job's payload plus "upstream" (each direct upstream step's
    output). A payload that is not an object is kept under "payload"."""
    if payload is None:
        return {"upstream": upstream_outputs}
    if isinstance(payload, dict):
        return {**payload, "upstream": upstream_outputs}
    return {"payload": payload, "upstream": upstream_outputs}


def run_status(steps: list[ExecutionStatus], cancel_requested: bool) -> ExecutionStatus | None:
    """The run's end once every step has ended (None while any can still run): CANCELLED if it was
    cancelled or a step was, DEAD if a step exhausted its retries, else SUCCEEDED."""
    if any(status not in STEP_ENDED for status in steps):
        return None
    if cancel_requested or ExecutionStatus.CANCELLED in steps:
        return ExecutionStatus.CANCELLED
    if any(status in (ExecutionStatus.DEAD, ExecutionStatus.UPSTREAM_FAILED) for status in steps):
        return ExecutionStatus.DEAD
    return ExecutionStatus.SUCCEEDED
