"""A throwaway PKI for the security tests: a CA, a broker certificate for 127.0.0.1/localhost and
a client certificate, made with the system's openssl (the `cryptography` package is not a
dependency). EC P-256 keys: fast to make."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Pki:
    ca: Path
    broker_keystore: Path  # key + certificate, PEM
    client_cert: Path
    client_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _signed(name: str, subject: str, extensions: str, d: Path) -> None:
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=d)
    (d / f"{name}.ext").write_text(extensions)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext", cwd=d)


@pytest.fixture(scope="session")
def pki(tmp_path_factory) -> Pki:
    d = tmp_path_factory.mktemp("pki")
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=logbroker-test-ca", cwd=d)
    _signed("broker", "/CN=localhost", "subjectAltName=DNS:localhost,IP:127.0.0.1\n", d)
    _signed("client", "/O=Example/OU=eng/CN=alice", "extendedKeyUsage=clientAuth\n", d)
    keystore = d / "broker-keystore.pem"
    keystore.write_text((d / "broker.key").read_text() + (d / "broker.pem").read_text())
    return Pki(d / "ca.pem", keystore, d / "client.pem", d / "client.key")
