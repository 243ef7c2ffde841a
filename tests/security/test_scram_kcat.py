"""SCRAM with librdkafka before 2.6.1 (kcat's bundled 2.0.2), which sends the client nonce twice
in its final message: accepted as Kafka 3.9 accepts it (the nonce must end with the server's),
while a final message without the server's nonce is still refused."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from logbroker.security.sasl import SaslFailed
from logbroker.security.scram import ScramFormatter, ScramSaslServer
from logbroker.testing import BrokerProcess


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_authenticates_with_scram_sha_512(tmp_path):
    properties = tmp_path / "server.properties"
    properties.write_text(f"log.dirs={tmp_path / 'data'}\n")
    subprocess.run([sys.executable, "-m", "logbroker.cli", "users", "--config", str(properties), "--add-scram",
                    "SCRAM-SHA-512=[name=kc,password=kc-pw]"], check=True, capture_output=True)
    overrides = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "security.inter.broker.protocol": "SASL_PLAINTEXT",
                 "sasl.enabled.mechanisms": "SCRAM-SHA-512"}
    with BrokerProcess(tmp_path, config_file=properties, overrides=overrides) as broker:
        listing = subprocess.run(
            ["kcat", "-L", "-m", "20", "-b", broker.bootstrap, "-X", "security.protocol=SASL_PLAINTEXT",
             "-X", "sasl.mechanism=SCRAM-SHA-512", "-X", "sasl.username=kc", "-X", "sasl.password=kc-pw"],
            capture_output=True, text=True, timeout=60)
    assert listing.returncode == 0, listing.stderr[-500:]
    assert f"broker 0 at {broker.bootstrap}" in listing.stdout


def test_final_message_without_the_server_nonce_is_refused():
    credential = ScramFormatter("SCRAM-SHA-256").credential("pw")
    server = ScramSaslServer("SCRAM-SHA-256", {"u": credential}.get)
    server_first = server.evaluate(b"n,,n=u,r=clientnonce").decode()
    server_nonce = server_first.split(",")[0].removeprefix("r=")
    with pytest.raises(SaslFailed, match="Invalid client nonce"):
        server.evaluate(f"c=biws,r={server_nonce}x,p=AAAA".encode())
