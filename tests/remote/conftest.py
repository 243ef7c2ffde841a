"""tests/remote: tiered storage against a real S3 endpoint (moto's standalone server over HTTP on
127.0.0.1) and the local-directory store, with real brokers and real clients."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "broker"))

from clients import drop_admins  # noqa: E402
from tiered_helpers import Bucket  # noqa: E402

logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto logs every request

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_REGION": "us-east-1"}


@pytest.fixture(scope="session")
def s3_endpoint():
    """moto's S3 server on a free port of 127.0.0.1; its address. The AWS credentials variables
    are set for the brokers started meanwhile (they inherit the environment)."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    with pytest.MonkeyPatch.context() as patch:
        for key, value in CREDENTIALS.items():
            patch.setenv(key, value)
        try:
            yield f"http://{host}:{port}"
        finally:
            server.stop()


@pytest.fixture
def bucket(s3_endpoint) -> Bucket:
    return Bucket(s3_endpoint)


@pytest.fixture(autouse=True)
def _drop_admin_clients():
    yield
    drop_admins()
