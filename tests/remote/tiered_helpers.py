"""Helpers of the tiered storage tests: a bucket on the moto server, a broker tiering to it, what
it holds locally and remotely, its metrics, and polling for background work."""

from __future__ import annotations

import json
import re
import time
import urllib.request
import uuid

from logbroker.testing import TEST_OVERRIDES, BrokerProcess, wait_for

from clients import TIMEOUT_S, RawClient, Spec


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


TIERED = {"remote.storage.enable": "true", "segment.bytes": "8192", "local.retention.bytes": "16384",
          "file.delete.delay.ms": "0"}
PRODUCER = {"batch.size": 2048, "linger.ms": 5}


def start_broker(tmp_path, bucket, **extra) -> BrokerProcess:
    overrides = {**TEST_OVERRIDES, **bucket.broker_overrides(), "remote.log.manager.task.interval.ms": "100",
                 **extra}
    return BrokerProcess(tmp_path / "broker", overrides=overrides).start()


BASE_TIMESTAMP = int(time.time() * 1000) - 3_600_000  # an hour ago: well inside retention.ms


def specs(count: int, start: int = 0) -> list[Spec]:
    """Record i has timestamp BASE_TIMESTAMP + 10 i."""
    return [Spec(0, f"k{i}".encode(), f"value-{i:06d}-".encode() * 8, timestamp=BASE_TIMESTAMP + 10 * i)
            for i in range(start, start + count)]


def local_segments(broker: BrokerProcess, topic: str, partition: int = 0) -> list[int]:
    return sorted(int(p.stem) for p in (broker.data_dir / f"{topic}-{partition}").glob("*.log"))


def earliest_offset(broker: BrokerProcess, topic: str) -> int:
    with RawClient(broker.bootstrap) as client:
        return client.list_offset(topic, 0, -2, version=9).offset


def remote_metadata(bucket, topic: str, partition: int = 0) -> list[dict]:
    found = [json.loads(bucket.get(k)) for k in bucket.keys() if k.endswith(".metadata")
             and k.split("/")[1].startswith(f"{topic}-{partition}-")]
    return sorted(found, key=lambda m: m["start_offset"])


def scrape(broker: BrokerProcess) -> dict[str, float]:
    """The broker's /metrics samples, by name with labels as written."""
    address = re.search(r"Metrics endpoint listening on (http://\S+/metrics)", broker.new_log_text()).group(1)
    with urllib.request.urlopen(address, timeout=TIMEOUT_S) as response:
        text = response.read().decode()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line and not line.startswith("#")}


class Store:
    """The partition's objects in the bucket, by segment."""

    def __init__(self, bucket, topic: str) -> None:
        self.bucket = bucket
        self.prefix = f"cluster-a/{topic}-0-"

    def stems(self) -> tuple[dict[str, list[str]], set[str]]:
        """(segment stem → its keys, the stems with a .metadata)."""
        by_stem: dict[str, list[str]] = {}
        for key in self.bucket.keys(self.prefix):
            name = key.rsplit("/", 1)[1]
            if "-" in name and "." in name:
                by_stem.setdefault(name.split(".", 1)[0], []).append(key)
        return by_stem, {s for s, keys in by_stem.items() if any(k.endswith(".metadata") for k in keys)}

    def uncommitted(self) -> list[str]:
        """Keys of segments whose data objects are there without their metadata."""
        by_stem, committed = self.stems()
        return sorted(k for s, keys in by_stem.items() if s not in committed for k in keys)

    def metadata(self) -> list[dict]:
        """The committed segments' metadata (one deleted between the listing and its GET left out)."""
        found = []
        for key in self.bucket.keys(self.prefix):
            if key.endswith(".metadata"):
                try:
                    found.append(json.loads(self.bucket.get(key)))
                except self.bucket.client.exceptions.NoSuchKey:
                    continue
        return sorted(found, key=lambda m: (m["start_offset"], m["end_offset"]))
