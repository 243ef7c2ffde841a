"""schema.registry.listeners: an https:// listener with the broker's PEM keys; malformed entries refused."""

from __future__ import annotations

import json
import ssl
import subprocess
import urllib.request

from logbroker.testing import TEST_OVERRIDES, BrokerProcess


def self_signed(tmp_path):
    """(keystore with key and certificate, the certificate) for localhost and 127.0.0.1."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", "key.pem", "-out", "cert.pem", "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   cwd=tmp_path, check=True, capture_output=True)
    keystore = tmp_path / "keystore.pem"
    keystore.write_text((tmp_path / "key.pem").read_text() + (tmp_path / "cert.pem").read_text())
    return keystore, tmp_path / "cert.pem"


def register_over_https(url: str, ca: str) -> None:
    context = ssl.create_default_context(cafile=ca)
    request = urllib.request.Request(url + "/subjects/s/versions", method="POST",
                                     data=json.dumps({"schema": '"string"'}).encode(),
                                     headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    with urllib.request.urlopen(request, context=context, timeout=30) as response:
        assert json.loads(response.read()) == {"id": 1}
    with urllib.request.urlopen(url + "/subjects", context=context, timeout=30) as response:
        assert json.loads(response.read()) == ["s"]


def test_https_listener_serves_with_the_brokers_pem_keys(tmp_path):
    keystore, cert = self_signed(tmp_path)
    with BrokerProcess(tmp_path / "broker", overrides={
            **TEST_OVERRIDES, "schema.registry.listeners": "https://127.0.0.1:0",
            "ssl.keystore.location": str(keystore)}) as broker:
        url = broker.schema_registry_url()
        assert url.startswith("https://127.0.0.1:")
        register_over_https(url, str(cert))
        try:
            urllib.request.urlopen(url + "/subjects", timeout=30)  # the system CAs do not know it
            raise AssertionError("an unknown certificate was accepted")
        except urllib.error.URLError as exc:
            assert isinstance(exc.reason, ssl.SSLCertVerificationError)


def test_the_registry_reads_its_topic_over_a_tls_only_broker(tmp_path):
    keystore, cert = self_signed(tmp_path)
    with BrokerProcess(tmp_path / "broker", overrides={
            **TEST_OVERRIDES, "listeners": "SSL://127.0.0.1:0", "security.inter.broker.protocol": "SSL",
            "schema.registry.listeners": "https://127.0.0.1:0", "ssl.keystore.location": str(keystore),
            "ssl.truststore.location": str(cert)}) as broker:
        register_over_https(broker.schema_registry_url(), str(cert))


def test_a_malformed_listener_is_a_config_error():
    from logbroker.server.config import KafkaConfig
    from logbroker.server.config_defs import ConfigError
    assert KafkaConfig.from_props({"schema.registry.listeners": "http://127.0.0.1:0,https://:8443"}) \
        .schema_registry_listeners == ["http://127.0.0.1:0", "https://:8443"]
    for value in ("ftp://h:1", "http://h", "127.0.0.1:8081"):
        try:
            KafkaConfig.from_props({"schema.registry.listeners": value})
            raise AssertionError(f"{value} was accepted")
        except ConfigError as exc:
            assert "schema.registry.listeners" in str(exc)
