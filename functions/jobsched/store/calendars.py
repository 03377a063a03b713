"""Exclusion calendars in DynamoDB: two items per calendar beside the tenant's jobs (Jobs table,
partition `tenantId`), and the reference count kept by the jobs' own writes.

- `cal#<name>`: description and dates (at most 1,000 of 10 bytes: about 12 KB), what the tick reads.
- `calref#<name>`: `refCount`, the number of jobs not CANCELLED that name the calendar. Kept apart
  from the dates so that a job's create, replace or cancel, which moves the count in one transaction
  with the job's own conditional write, is billed on a 100-byte item and not on the 12 KB of dates.

A job may name a calendar only while its `calref#` item exists (the transaction's condition), and
a calendar is deleted only with `refCount = 0` (the delete's condition), so no interleaving of the
two leaves a job naming a deleted calendar (docs/architecture.md, "Exclusion calendars")."""
from __future__ import annotations

import time
from typing import Any, Callable

from boto3.dynamodb.conditions import Attr, Key
from botocore.exceptions import ClientError

from jobsched.domain.calendars import Calendar
from jobsched.domain.errors import Conflict, FieldProblem, InvalidRequest, NotFound, UnprocessableRequest
from jobsched.store.dynamo import (
    BATCH_GET_LIMIT,
    Page,
    batch_until_done,
    decode_cursor,
    encode_cursor,
    plain,
    raw_client,
)
from jobsched.store.wire import item_from_wire

CALENDAR_PREFIX = "cal#"
CALENDAR_REFS_PREFIX = "calref#"
TRANSACTION_CANCELED = "TransactionCanceledException"
# A deleted calendar's items stay as tombstones this long (DynamoDB's TTL then removes them).
TOMBSTONE_TTL_S = 86_400
CONDITION_FAILED_REASON = "ConditionalCheckFailed"


def _refs_key(tenant_id: str, name: str) -> dict:
    return {"tenantId": tenant_id, "jobId": f"{CALENDAR_REFS_PREFIX}{name}"}


def _cancellation_codes(exc: ClientError) -> list[str] | None:
    if exc.response.get("Error", {}).get("Code") != TRANSACTION_CANCELED:
        return None
    return [(reason or {}).get("Code", "None") for reason in exc.response.get("CancellationReasons") or []]


def write_job_with_calendar_refs(table, job_write: dict, tenant_id: str, added: tuple[str, ...],
                                 removed: tuple[str, ...], field_of: Callable[[str], str],
                                 job_lost: Callable[[ClientError], Exception]) -> None:
    """The job's own conditional put and the reference counts it moves, in one transaction: +1 on
    each added calendar (only while it exists: its `calref#` item), -1 on each removed one. A lost
    job condition raises `job_lost(exc)`; a missing calendar 422 naming `field_of(name)`."""
    actions: list[dict] = [{"Put": {"TableName": table.name, **job_write}}]
    for name in added:
        actions.append({"Update": {"TableName": table.name, "Key": _refs_key(tenant_id, name),
                                   "UpdateExpression": "ADD refCount :one",
                                   "ConditionExpression": "attribute_exists(refCount)",
                                   "ExpressionAttributeValues": {":one": 1}}})
    for name in removed:
        # No condition: a calendar cannot be deleted while this job counts in it.
        actions.append({"Update": {"TableName": table.name, "Key": _refs_key(tenant_id, name),
                                   "UpdateExpression": "ADD refCount :minus",
                                   "ExpressionAttributeValues": {":minus": -1}}})
    try:
        table.meta.client.transact_write_items(TransactItems=actions)
    except ClientError as exc:
        codes = _cancellation_codes(exc)
        if codes is None:
            raise
        if codes and codes[0] == CONDITION_FAILED_REASON:
            raise job_lost(exc) from exc
        for name, code in zip(added, codes[1:]):
            if code == CONDITION_FAILED_REASON:
                raise UnprocessableRequest.for_field(field_of(name), f"no calendar {name}; PUT /v1/calendars/{name} "
                                                                     "first") from exc
        raise


class CalendarsStore:
    def __init__(self, dynamodb, table_name: str, sleep: Callable[[float], None] = time.sleep, client=None) -> None:
        self._table = dynamodb.Table(table_name)
        self._client = client or raw_client(dynamodb)
        self._name = table_name
        self._sleep = sleep

    def put(self, tenant_id: str, name: str, description: str, dates: tuple[str, ...], now_ms: int) -> Calendar:
        """Create or replace a calendar's dates. The dates item first, its reference count second:
        a crash between leaves a calendar that no job can name yet (422) until the PUT is repeated,
        never a count without dates. A deleted calendar's tombstone becomes the new calendar."""
        answer = self._table.update_item(
            Key={"tenantId": tenant_id, "jobId": f"{CALENDAR_PREFIX}{name}"},
            UpdateExpression="SET description = :description, dates = :dates, updatedMs = :now, "
                             "createdMs = if_not_exists(createdMs, :now), "
                             "calVersion = if_not_exists(calVersion, :zero) + :one REMOVE expiresAt",
            ExpressionAttributeValues={":description": description, ":dates": list(dates), ":now": now_ms,
                                       ":zero": 0, ":one": 1},
            ReturnValues="ALL_NEW")
        self._table.update_item(Key=_refs_key(tenant_id, name),
                                UpdateExpression="SET refCount = if_not_exists(refCount, :zero) REMOVE expiresAt",
                                ExpressionAttributeValues={":zero": 0})
        return _calendar(plain(answer["Attributes"]))

    def get(self, tenant_id: str, name: str) -> Calendar | None:
        item = self._table.get_item(Key={"tenantId": tenant_id, "jobId": f"{CALENDAR_PREFIX}{name}"},
                                    ConsistentRead=True).get("Item")
        return _calendar(plain(item)) if item and "dates" in item else None  # no dates: a tombstone

    def list(self, tenant_id: str, limit: int, cursor: str | None) -> Page:
        """The tenant's calendars by name. A cursor is the last key returned."""
        start = decode_cursor(cursor, {"tenantId": str, "jobId": str})
        if start and (start["tenantId"] != tenant_id or not start["jobId"].startswith(CALENDAR_PREFIX)):
            raise InvalidRequest("cursor: belongs to another list", [FieldProblem("cursor", "belongs to another list")])
        items: list[Calendar] = []

        def after(calendar: Calendar) -> str | None:
            return encode_cursor({"tenantId": tenant_id, "jobId": f"{CALENDAR_PREFIX}{calendar.name}"})

        while True:
            kwargs: dict[str, Any] = {
                "KeyConditionExpression": Key("tenantId").eq(tenant_id) & Key("jobId").begins_with(CALENDAR_PREFIX),
                "FilterExpression": Attr("dates").exists(),  # tombstones of deleted calendars are passed over
                "Limit": limit - len(items), "ConsistentRead": True}
            if start:
                kwargs["ExclusiveStartKey"] = start
            answer = self._table.query(**kwargs)
            for raw in answer.get("Items", []):
                items.append(_calendar(plain(raw)))
                if len(items) == limit:
                    return Page(items, after(items[-1]), after)
            start = answer.get("LastEvaluatedKey")
            if not start:
                return Page(items, None, after)

    def delete(self, tenant_id: str, name: str, now_ms: int) -> Calendar:
        """Delete a calendar no job counts in (409 while one does; 404 if there is none). Written as
        tombstones that DynamoDB's TTL removes a day later (the functions hold no DeleteItem): the
        count's item loses `refCount`, so no job can name the calendar any more, and the dates item
        loses its dates, in one transaction conditional on the count being 0."""
        existing = self.get(tenant_id, name)
        if existing is None:
            raise NotFound(f"no calendar {name}")
        expires = now_ms // 1000 + TOMBSTONE_TTL_S
        try:
            self._table.meta.client.transact_write_items(TransactItems=[
                {"Update": {"TableName": self._name, "Key": _refs_key(tenant_id, name),
                            "UpdateExpression": "REMOVE refCount SET expiresAt = :expires",
                            "ConditionExpression": "attribute_not_exists(refCount) OR refCount <= :zero",
                            "ExpressionAttributeValues": {":zero": 0, ":expires": expires},
                            "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}},
                {"Update": {"TableName": self._name,
                            "Key": {"tenantId": tenant_id, "jobId": f"{CALENDAR_PREFIX}{name}"},
                            "UpdateExpression": "REMOVE dates, description, createdMs, calVersion "
                                                "SET expiresAt = :expires, updatedMs = :now",
                            "ConditionExpression": "attribute_exists(dates)",
                            "ExpressionAttributeValues": {":expires": expires, ":now": now_ms}}},
            ])
        except ClientError as exc:
            codes = _cancellation_codes(exc)
            if codes is None:
                raise
            if codes and codes[0] == CONDITION_FAILED_REASON:
                item = (exc.response.get("CancellationReasons") or [{}])[0].get("Item")
                used = plain(item_from_wire(item)).get("refCount") if item else None
                count = f"{used} jobs use" if used is not None else "jobs use"
                raise Conflict(f"calendar {name}: {count} it (excludeCalendars); change or delete them first") from exc
            if len(codes) > 1 and codes[1] == CONDITION_FAILED_REASON:
                raise NotFound(f"no calendar {name}") from exc
            raise
        return existing

    def dates_many(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], frozenset[str] | None]:
        """The dates of each (tenant, calendar), None for a calendar that does not exist: one
        strongly consistent BatchGetItem per 100 (a PUT answered before this read applies)."""
        found: dict[tuple[str, str], frozenset[str] | None] = {key: None for key in keys}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), BATCH_GET_LIMIT):
            request = {self._name: {
                "Keys": [{"tenantId": {"S": t}, "jobId": {"S": f"{CALENDAR_PREFIX}{n}"}}
                         for t, n in unique[start:start + BATCH_GET_LIMIT]],
                "ConsistentRead": True,
                "ProjectionExpression": "tenantId, jobId, dates"}}
            for answer in batch_until_done(lambda r: self._client.batch_get_item(RequestItems=r), request,
                                           "UnprocessedKeys", self._sleep):
                for raw in answer.get("Responses", {}).get(self._name, []):
                    item = item_from_wire(raw)
                    name = item["jobId"][len(CALENDAR_PREFIX):]
                    if "dates" in item:  # else a tombstone: no calendar
                        found[(item["tenantId"], name)] = frozenset(item["dates"])
        return found


def _calendar(item: dict) -> Calendar:
    return Calendar(tenant_id=item["tenantId"], name=item["jobId"][len(CALENDAR_PREFIX):],
                    description=item.get("description", ""), dates=tuple(item.get("dates") or ()),
                    created_ms=int(item["createdMs"]), updated_ms=int(item["updatedMs"]),
                    version=int(item.get("calVersion", 1)))
