"""Helpers of the tiered storage tests: a bucket on the moto server, and polling for background work."""

from __future__ import annotations

import uuid

from logbroker.testing import wait_for


class Bucket:
    """A fresh bucket on the moto server, read with boto3 to check what the broker put there."""

    def __init__(self, endpoint: str) -> None:
        import boto3

        self.endpoint = endpoint
        self.name = f"tiered-{uuid.uuid4().hex[:12]}"
        self.client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        self.client.create_bucket(Bucket=self.name)

    def keys(self, prefix: str = "") -> list[str]:
        keys, token = [], None
        while True:
            kwargs = {"Bucket": self.name, "Prefix": prefix}
            if token:
                kwargs["ContinuationToken"] = token
            page = self.client.list_objects_v2(**kwargs)
            keys += [o["Key"] for o in page.get("Contents", [])]
            token = page.get("NextContinuationToken")
            if not token:
                return sorted(keys)

    def get(self, key: str) -> bytes:
        return self.client.get_object(Bucket=self.name, Key=key)["Body"].read()

    def broker_overrides(self, prefix: str = "cluster-a") -> dict[str, str]:
        return {"remote.log.storage.system.enable": "true",
                "remote.log.storage.manager.class.name": "s3",
                "rsm.config.s3.bucket": self.name, "rsm.config.s3.endpoint": self.endpoint,
                "rsm.config.s3.region": "us-east-1", "rsm.config.s3.prefix": prefix}


def wait_until(predicate, what: str, timeout_s: float = 20.0):
    """logbroker.testing.wait_for, polling faster (uploads and expiry run every 100 ms here)."""
    return wait_for(predicate, timeout_s, 0.05, what=what)
