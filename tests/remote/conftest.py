"""tests/remote: tiered storage against a real S3 endpoint (moto's standalone server over HTTP on
127.0.0.1) and the local-directory store, with real brokers and real clients."""

from __future__ import annotations

import logging
import os
import sys
import time
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "broker"))

from clients import drop_admins  # noqa: E402

logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto logs every request

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_REGION": "us-east-1"}


@pytest.fixture(scope="session")
def s3_endpoint():
    """moto's S3 server on a free port of 127.0.0.1; its address. The AWS credentials variables
    are set for the brokers started meanwhile (they inherit the environment)."""
    from moto.server import ThreadedMotoServer

    saved = {k: os.environ.get(k) for k in CREDENTIALS}
    os.environ.update(CREDENTIALS)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


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


@pytest.fixture
def bucket(s3_endpoint) -> Bucket:
    return Bucket(s3_endpoint)


def wait_until(predicate, what: str, timeout_s: float = 20.0):
    """Poll `predicate` until it returns something true (background work: uploads, expiry)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture(autouse=True)
def _drop_admin_clients():
    yield
    drop_admins()
