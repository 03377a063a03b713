"""The ApiKeys table: API keys by their hash."""
from __future__ import annotations

from typing import Any

from boto3.dynamodb.conditions import Attr
from botocore.exceptions import ClientError

from jobsched.store.dynamo import _condition_lost, plain
class ApiKeysStore:
    def __init__(self, dynamodb, table_name: str) -> None:
        self._table = dynamodb.Table(table_name)

    def tenant_for(self, key_hash: str) -> str | None:
        item = self._table.get_item(Key={"keyHash": key_hash}).get("Item")
        if not item or item.get("revoked"):
            return None
        return str(item["tenantId"])

    def list_keys(self, tenant_id: str | None) -> list[dict]:
        """Administration only (the CLI), never on a request path: the table holds one small
        item per key, and a scan reads them all."""
        kwargs: dict[str, Any] = {"ProjectionExpression": "keyId, tenantId, createdMs, revoked"}
        if tenant_id:
            kwargs["FilterExpression"] = Attr("tenantId").eq(tenant_id)
        items: list[dict] = []
        while True:
            answer = self._table.scan(**kwargs)
            items.extend(plain(i) for i in answer.get("Items", []))
            if not answer.get("LastEvaluatedKey"):
                return sorted(items, key=lambda i: (i["tenantId"], i["createdMs"]))
            kwargs["ExclusiveStartKey"] = answer["LastEvaluatedKey"]

    def revoke(self, key_id: str, now_ms: int) -> dict | None:
        """Mark the key with this id revoked; None if no such key."""
        prefix = key_id.removeprefix("key_")
        kwargs: dict[str, Any] = {"FilterExpression": Attr("keyHash").begins_with(prefix) & Attr("keyId").eq(key_id)}
        while True:
            answer = self._table.scan(**kwargs)
            for item in answer.get("Items", []):
                self._table.update_item(Key={"keyHash": item["keyHash"]}, UpdateExpression="SET revoked = :now",
                                        ConditionExpression="attribute_exists(keyHash)",
                                        ExpressionAttributeValues={":now": now_ms})
                return plain({k: v for k, v in item.items() if k != "keyHash"})
            if not answer.get("LastEvaluatedKey"):
                return None
            kwargs["ExclusiveStartKey"] = answer["LastEvaluatedKey"]

    def put(self, key_hash: str, tenant_id: str, key_id: str, now_ms: int) -> None:
        try:
            self._table.put_item(
                Item={"keyHash": key_hash, "tenantId": tenant_id, "keyId": key_id, "createdMs": now_ms},
                ConditionExpression="attribute_not_exists(keyHash)",
            )
        except ClientError as exc:
            raise (_condition_lost(exc, "key exists") or exc) from exc
