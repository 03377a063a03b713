"""What the local stack keeps across restarts: every item of its tables (jobs, timers, executions,
watermarks, API keys), every message of its queues, and its KMS key's material (the emulator makes
a new key at each start: without the old material no tenant's signing secret would decrypt), written under the work directory as they
change (a snapshot every SNAPSHOT_SECONDS while anything changed, less often when snapshots take
long: SNAPSHOT_PAUSE_FACTOR, and at a clean stop), and put
back into a fresh emulator when the stack starts again.

This runs in the emulator's process, so a snapshot reads moto's backends directly: a fork of the
process taken under the emulator's lock (a consistent cut: no request is half applied) reads and
writes them, while the emulator goes on serving.
Tables and queues are matched by their logical id in the template, since the emulator names them
anew at each start. A message comes back with the time it had left before becoming visible (at
most SQS's 15-minute delay); one that a worker had received and not deleted comes back visible at
once, as after a worker's crash in AWS (its execution's claim and lease decide what happens).
The time a message had left counts from the snapshot: the time the stack was down has passed for
it as well (a message due during the outage is visible at once after the restart)."""
from __future__ import annotations

import base64
import json
import os
import threading
import time
from pathlib import Path

from jobsched.local.emulator import EMULATOR_LOCK
from jobsched.store.queues import delay_seconds

STATE_FILE = "state.json"
SNAPSHOT_SECONDS = 1.0
# A snapshot reads every item and message under the emulator's lock and writes them all: as the
# state grows it takes longer, and at one a second it would take most of the stack's time. So the
# pause after a snapshot is at least this many times its own duration: snapshots take at most
# 1 / (1 + SNAPSHOT_PAUSE_FACTOR) of the time, and a hard kill loses at most that pause.
SNAPSHOT_PAUSE_FACTOR = 9.0
FORMAT = 1


def snapshot_pause(snapshot_seconds: float) -> float:
    """The wait before the next snapshot, after one that took `snapshot_seconds`."""
    return max(SNAPSHOT_SECONDS, SNAPSHOT_PAUSE_FACTOR * snapshot_seconds)


def _saved(attributes: dict) -> dict:
    """An item's attributes for the JSON state file: a binary value (a timer pack's timers; moto
    keeps it as bytes) as base64 text."""
    return {name: {"B": base64.b64encode(value["B"]).decode()} if isinstance(value.get("B"), bytes) else value
            for name, value in attributes.items()}


def _restored(row: dict) -> dict:
    """_saved() undone: base64 text back to the bytes DynamoDB is given (boto3 encodes them)."""
    return {name: {"B": base64.b64decode(value["B"])} if "B" in value else value for name, value in row.items()}


class StateKeeper:
    def __init__(self, workdir: Path, physical_ids: dict[str, str], region: str = "us-east-1",
                 account: str = "123456789012") -> None:
        self.path = workdir / STATE_FILE
        self._physical = physical_ids
        self._region, self._account = region, account
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.snapshots = 0
        self.locked_seconds = 0.0  # snapshots' time with the emulator's lock held (bench lateness)
        self.saving_seconds = 0.0  # snapshots' time in all

    # --- save ----------------------------------------------------------------------------------
    def _backends(self):
        from moto.dynamodb.models import dynamodb_backends
        from moto.sqs.models import sqs_backends

        return dynamodb_backends[self._account][self._region], sqs_backends[self._account][self._region]

    def _kms(self):
        from moto.kms.models import kms_backends

        return kms_backends[self._account][self._region]

    def capture(self) -> dict:
        """A consistent cut of every table and queue of the stack, by logical id."""
        dynamodb, sqs = self._backends()
        kms = self._kms()
        tables: dict[str, list] = {}
        queues: dict[str, list] = {}
        keys: dict[str, dict] = {}
        with EMULATOR_LOCK:
            started = time.perf_counter()
            now_ms = int(time.time() * 1000)
            for logical, physical in self._physical.items():
                if physical in dynamodb.tables:
                    tables[logical] = [_saved(item.to_json()["Attributes"])
                                       for item in dynamodb.tables[physical].all_items()]
                    continue
                if physical in kms.keys:
                    # The key's material, and every id it had (one per start: the emulator makes the
                    # key anew each time), so that what it encrypted before still decrypts.
                    key = kms.keys[physical]
                    keys[logical] = {"material": base64.b64encode(key.key_material).decode(),
                                     "ids": sorted(i for i, k in kms.keys.items() if k is key)}
                    continue
                name = physical.rstrip("/").rsplit("/", 1)[-1]
                queue = sqs.queues.get(name)
                if queue is not None:
                    queues[logical] = [
                        {"body": m.body,
                         "visibleInMs": max(0, max(int(m.delayed_until or 0), int(m.visible_at or 0)) - now_ms)
                         if not m.approximate_receive_count else 0}
                        for m in list(queue._messages)]
            self.locked_seconds += time.perf_counter() - started
        return {"format": FORMAT, "savedAtMs": now_ms, "tables": tables, "queues": queues, "keys": keys}

    def save(self) -> None:
        """Write a consistent cut of the state. Where the system can fork, a copy of the emulator's
        process (taken under the lock: no request half applied) writes it, as Redis's BGSAVE does:
        the emulator then pauses for the fork alone, not for reading and encoding every item."""
        started = time.perf_counter()
        if hasattr(os, "fork"):
            self._save_in_fork()
        else:
            self._write(self.capture())
        self.snapshots += 1
        self.saving_seconds += time.perf_counter() - started

    def _save_in_fork(self) -> None:
        with EMULATOR_LOCK:
            forking = time.perf_counter()
            pid = os.fork()
            if pid == 0:  # the copy: one thread, the emulator as it was; write and leave at once
                code = 1
                try:
                    self._write(self.capture())
                    code = 0
                finally:
                    os._exit(code)
            self.locked_seconds += time.perf_counter() - forking
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"the snapshot process ended with {os.waitstatus_to_exitcode(status)}")

    def _write(self, state: dict) -> None:
        temporary = self.path.with_suffix(f".{os.getpid()}.tmp")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Readable by the user only: it holds the KMS key material that opens tenants' signing secrets.
        with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as handle:
            json.dump(state, handle, separators=(",", ":"))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)  # atomic: a crash leaves the previous snapshot whole

    def start(self, changes) -> "StateKeeper":
        """Save every SNAPSHOT_SECONDS while `changes()` (a counter of mutating requests) moves,
        or less often when a snapshot takes long (SNAPSHOT_PAUSE_FACTOR)."""
        def loop() -> None:
            seen = changes()
            pause = SNAPSHOT_SECONDS
            while not self._stop.wait(pause):
                now = changes()
                if now != seen:
                    seen = now
                    started = time.perf_counter()
                    try:
                        self.save()
                    except Exception as exc:  # noqa: BLE001 - keep serving; say so
                        print(f"jobsched: could not save state: {exc}", flush=True)
                    pause = snapshot_pause(time.perf_counter() - started)
        self._thread = threading.Thread(target=loop, name="state", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """A last snapshot at a clean stop (Ctrl-C, SIGTERM)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        self.save()

    # --- restore -------------------------------------------------------------------------------
    def restore(self, session) -> dict:
        """Put a saved state back into the (empty, just created) tables and queues. Returns what
        was restored: items and messages."""
        if not self.path.is_file():
            return {"items": 0, "messages": 0}
        state = json.loads(self.path.read_text())
        if state.get("format") != FORMAT:
            raise RuntimeError(f"{self.path} was written by another version; start with RESET=1")
        dynamodb = session.client("dynamodb")
        sqs = session.client("sqs")
        saved_at_ms = int(state["savedAtMs"])
        key_ids = self._restore_keys(state.get("keys", {}))
        items = messages = 0
        for logical, rows in state["tables"].items():
            table = self._physical.get(logical)
            if table is None:
                continue  # a table the template no longer has
            for start in range(0, len(rows), 25):
                requests = [{"PutRequest": {"Item": _restored(row)}} for row in rows[start:start + 25]]
                while requests:
                    answer = dynamodb.batch_write_item(RequestItems={table: requests})
                    requests = answer.get("UnprocessedItems", {}).get(table, [])
            items += len(rows)
        for logical, rows in state["queues"].items():
            url = self._physical.get(logical)
            if url is None:
                continue
            for start in range(0, len(rows), 10):
                # The time a message had left counts from the snapshot, not from now: the time the
                # stack was down has passed for it too. Rounded as the functions round a delay.
                now_ms = int(time.time() * 1000)
                entries = [{"Id": str(i), "MessageBody": row["body"],
                            "DelaySeconds": delay_seconds(saved_at_ms + int(row["visibleInMs"]), now_ms)}
                           for i, row in enumerate(rows[start:start + 10])]
                sqs.send_message_batch(QueueUrl=url, Entries=entries)
            messages += len(rows)
        return {"items": items, "messages": messages, "keyIds": key_ids}

    def _restore_keys(self, saved: dict) -> dict[str, str]:
        """The new start's key takes the saved material, and answers to the ids the key had before
        (a ciphertext names the key id it was made with): signing secrets encrypted before the
        restart decrypt after it, and new ones are made with the same material. Returns each
        earlier id with the id the key has now (the strict layer checks IAM on the latter, as a
        key on AWS keeps its one id)."""
        kms = self._kms()
        same: dict[str, str] = {}
        with EMULATOR_LOCK:
            for logical, kept in saved.items():
                current = self._physical.get(logical, "")
                key = kms.keys.get(current)
                if key is None:
                    continue  # a key the template no longer has
                key.key_material = base64.b64decode(kept["material"])
                for old_id in kept["ids"]:
                    kms.keys.setdefault(old_id, key)
                    same[old_id] = key.id
        return same

    def reset(self) -> None:
        for path in (self.path, *self.path.parent.glob(f"{self.path.stem}.*.tmp")):
            if path.exists():
                path.unlink()
