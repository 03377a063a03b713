"""`jobsched jobs create --file jobs.jsonl`: one job request a line, sent as batches of up to 100
(POST /v1/jobs/batch, jobsched.client's `jobs.create_batch`). Each batch goes with an
Idempotency-Key of its own, which the client sends again with the batch after a lost answer or a
503 for the whole batch (so nothing is created twice); the jobs a batch answers 429 (this
second's creates are used up) or 503 are sent again, alone, after a pause, a few times."""
from __future__ import annotations

import json
import time
from typing import Callable

from jobsched.client import Client, dump, new_idempotency_key

BATCH_SIZE = 100  # the API's largest batch
# A batch's body stays under the API's bound (5 MB) with room for the envelope.
BATCH_BYTES = 4 * 1024 * 1024
RETRIED_STATUSES = (429, 503)
RETRIES = 5


class JsonLinesError(ValueError):
    pass


def is_json_lines(path: str, text: str) -> bool:
    """A `.jsonl` file, or text that is not one JSON value but a JSON object a line."""
    if path.endswith(".jsonl"):
        return True
    try:
        json.loads(text)
        return False
    except ValueError:
        return len([line for line in text.splitlines() if line.strip()]) > 1


def read_json_lines(text: str) -> list[tuple[int, dict]]:
    """(line number, job request) for each non-blank line; a line that is not a JSON object names
    its number."""
    jobs = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            job = json.loads(line)
        except ValueError as exc:
            raise JsonLinesError(f"line {number}: not JSON: {exc}") from None
        if not isinstance(job, dict):
            raise JsonLinesError(f"line {number}: a job request must be a JSON object")
        jobs.append((number, job))
    if not jobs:
        raise JsonLinesError("no job requests in the file")
    return jobs


def batches(jobs: list[tuple[int, dict]]) -> list[list[tuple[int, dict]]]:
    """Consecutive groups of at most BATCH_SIZE jobs and BATCH_BYTES of body."""
    out: list[list[tuple[int, dict]]] = [[]]
    size = 0
    for entry in jobs:
        length = len(json.dumps(entry[1]))
        if out[-1] and (len(out[-1]) == BATCH_SIZE or size + length > BATCH_BYTES):
            out.append([])
            size = 0
        out[-1].append(entry)
        size += length
    return out


def send(client: Client, jobs: list[tuple[int, dict]], sleep: Callable[[float], None] | None = None,
         new_key: Callable[[], str] = new_idempotency_key) -> list[dict]:
    """Every job sent; returns per line {"line", "status", "job" | "error"} in the file's order."""
    sleep = sleep or time.sleep
    results: dict[int, dict] = {}
    pending = jobs
    for attempt in range(RETRIES + 1):
        again: list[tuple[int, dict]] = []
        for group in batches(pending):
            answer = dump(client.jobs.create_batch([job for _, job in group], idempotency_key=new_key()))
            for (line, job), result in zip(group, answer["results"]):
                if result["status"] in RETRIED_STATUSES and attempt < RETRIES:
                    again.append((line, job))
                else:
                    results[line] = {"line": line, **{k: v for k, v in result.items() if k != "index"}}
        if not again:
            break
        sleep(1.0 + attempt)  # a later second: the creates-per-second quota starts again
        pending = again
    return [results[line] for line, _ in jobs]

