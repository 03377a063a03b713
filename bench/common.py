"""What the benchmarks share: an emulator per run, the synthesized template, call counting."""
from __future__ import annotations

import contextlib
import os
import platform
import time
from collections import Counter
from pathlib import Path
from typing import Iterator

from jobsched.settings import Env

ROOT = Path(__file__).resolve().parents[1]
# Benchmarks create jobs faster than a tenant's default quota allows.
NO_QUOTAS = {"api": {Env.MAX_ACTIVE_JOBS: "100000000", Env.MAX_CREATES_PER_SECOND: "1000000"}}
_TEMPLATE: dict | None = None


def use_local_aws() -> None:
    from jobsched.local.fake_aws import use_local_aws_env

    use_local_aws_env()
    os.environ.update({"POWERTOOLS_LOG_LEVEL": "WARNING", "POWERTOOLS_METRICS_NAMESPACE": "Jobsched"})


def _template_cache() -> Path:
    """Where the benches keep their synthesized templates: the test suite's cache when it runs them
    (JOBSCHED_TEMPLATE_CACHE, shared by its workers and its local stacks), else .build/bench."""
    return Path(os.environ.get("JOBSCHED_TEMPLATE_CACHE") or ROOT / ".build" / "bench")


def template(segments: int = 4) -> dict:
    global _TEMPLATE
    if _TEMPLATE is None:
        from jobsched.local.synth import cached_template

        _TEMPLATE = cached_template(_template_cache(), segments=segments, allow_private_targets=True,
                                    progress=lambda said: None)
    return _TEMPLATE


_DEPLOYED: dict | None = None


def deployed_template() -> dict:
    """The default deployment's template (`cdk deploy` with no context but private targets allowed,
    which the bench's loopback target needs: an environment value, no resource): what `bench cost`
    prices. `template()` is the local stack's (container grants, the stack's own KMS key)."""
    global _DEPLOYED
    if _DEPLOYED is None:
        from jobsched.local.synth import cached_template

        _DEPLOYED = cached_template(_template_cache(), allow_private_targets=True, progress=lambda said: None,
                                    deployed=True)
    return _DEPLOYED


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}"


@contextlib.contextmanager
def emulator(clock, counter: "CallCounter | None" = None) -> Iterator[None]:
    """A fresh in-process moto, serialized, with SQS time following the given clock. With a
    counter, the time spent handling requests (inside the lock) is added to it."""
    from moto import mock_aws

    from jobsched.local.emulator import emulator_time, serialized_in_process

    timing = emulator_time_share(counter) if counter else contextlib.nullcontext()
    with mock_aws(), timing, serialized_in_process(), emulator_time(clock.now_ms):
        yield


class CallCounter:
    """Counts every AWS call by service and operation (botocore's event system), the items each
    write carries, and the time spent inside the emulator."""

    def __init__(self) -> None:
        self.calls: Counter = Counter()
        self.items_written: Counter = Counter()
        self.write_units = 0
        self.items_read = 0
        self.emulator_seconds = 0.0
        self.timing = False  # count emulator time only while measuring
        self.empty_receives = 0  # polls that found nothing: a fixed cost of polling, not per job

    def attach(self, session) -> None:
        session.events.register("provide-client-params.*.*", self._before)
        session.events.register("after-call.*.*", self._after)

    def _before(self, params, model, **kwargs):
        service = model.service_model.service_name
        op = model.name
        self.calls[(service, op)] += 1
        if service == "dynamodb":
            for item in _written_items(op, params):
                self.items_written[op] += 1
                self.write_units += max(1, -(-_item_size(item) // 1024))
        # Returns nothing: a returned dict would replace botocore's copy of the parameters, and
        # boto3's DynamoDB serializer would then rewrite the caller's own dicts in place.

    def _after(self, http_response, parsed, model, **kwargs):
        if model.service_model.service_name == "sqs" and model.name == "ReceiveMessage" and not parsed.get("Messages"):
            self.calls[("sqs", "ReceiveMessage")] -= 1
            self.empty_receives += 1
        if model.service_model.service_name == "dynamodb":
            if "Items" in parsed:
                self.items_read += len(parsed["Items"])
            elif "Item" in parsed:
                self.items_read += 1
            elif "Responses" in parsed:
                self.items_read += sum(len(v) for v in parsed["Responses"].values())

    def total(self, service: str, ops: tuple[str, ...] | None = None) -> int:
        return sum(n for (s, op), n in self.calls.items() if s == service and (ops is None or op in ops))


WRITE_OPS = ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems")
READ_OPS = ("GetItem", "Query", "BatchGetItem", "Scan", "TransactGetItems")


def _written_items(op: str, params: dict) -> list[dict]:
    if op in ("PutItem",):
        return [params["Item"]]
    if op == "UpdateItem":
        return [{**params.get("Key", {}), **params.get("ExpressionAttributeValues", {})}]
    if op == "DeleteItem":
        return [params.get("Key", {})]
    if op == "BatchWriteItem":
        return [r["PutRequest"]["Item"] for reqs in params["RequestItems"].values() for r in reqs if "PutRequest" in r]
    return []


def _item_size(item) -> int:
    """DynamoDB's item size, approximately: names plus values as stored."""
    size = 0
    for name, value in item.items():
        size += len(str(name)) + len(repr(value))
    return size


@contextlib.contextmanager
def emulator_time_share(counter: CallCounter) -> Iterator[None]:
    """Adds the wall time spent inside moto's request handling to counter.emulator_seconds (apply
    it before the serializing lock, so that waiting for the lock is not counted)."""
    from unittest import mock

    from moto.core.botocore_stubber import BotocoreStubber

    original = BotocoreStubber.__call__

    def timed(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            if counter.timing:
                counter.emulator_seconds += time.perf_counter() - start

    with mock.patch.object(BotocoreStubber, "__call__", timed):
        yield


@contextlib.contextmanager
def one_core(flags: list[str]) -> Iterator[str]:
    """Pin this process to one CPU unless `--all-cores` (the previous set is restored after):
    Lambda gives a function of up to 1,769 MB at most one vCPU (the tick has one, the worker at
    512 MB about 0.29), so its threads share one core. Spread over this machine's cores, the same
    threads pay for moving Python's objects between the cores' caches at every hand-over (about
    0.3 ms of CPU per worker job here), a cost the deployed functions do not have. Yields what the
    figures are measured on."""
    import os

    if "--all-cores" in flags or not hasattr(os, "sched_setaffinity"):
        yield f"all {os.cpu_count()} cores"
        return
    before = os.sched_getaffinity(0)
    cpu = min(before)
    os.sched_setaffinity(0, {cpu})
    try:
        yield f"one core (CPU {cpu}), as Lambda gives the functions at most one vCPU; --all-cores to spread"
    finally:
        os.sched_setaffinity(0, before)


def int_option(flags: list[str], name: str, default: int) -> int:
    """The value of `--name=N` among the flags, or the default."""
    for flag in flags:
        if flag.startswith(f"--{name}="):
            return int(flag.split("=", 1)[1])
    return default


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[index]


def print_table(title: str, rows: list[tuple], headers: tuple[str, ...]) -> None:
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    print(f"\n{title}")
    print("  ".join(h.ljust(w) for h, w in zip(headers, widths)))
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)))
