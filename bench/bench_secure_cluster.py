"""What a secure cluster costs: RF=3 acks=all produce throughput when every byte
between clients and brokers and between brokers (follower fetches) goes over SASL_SSL
(SCRAM-SHA-512, mutual TLS) versus PLAINTEXT. Three `logbroker serve` processes and one ZooKeeper
on this machine, confluent-kafka as the client.

    .venv/bin/python bench/bench_secure_cluster.py            # under a minute
    .venv/bin/python bench/bench_secure_cluster.py --records 10000 --reps 1

Each repeat uses a fresh topic (one partition, min.insync.replicas=2) and 1 KiB records
(linger.ms=5, batch.size=65536); the two clusters run one after the other, the median of the
repeats is reported. On 2 shared cores three brokers compete with the client and ZooKeeper, so
read the ratio, not the absolute numbers.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import machine_info, median, say, table  # noqa: E402

import confluent_kafka  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from logbroker.testing import ClusterProcess  # noqa: E402
from logbroker.zookeeper_process import ZooKeeperProcess  # noqa: E402

RECORD = b"x" * 1024
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="admin" password="admin-secret";')


def make_pki(d: Path) -> None:
    """A CA and one certificate for 127.0.0.1 (serverAuth and clientAuth) in `d`."""
    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=bench-ca")
    openssl("req", *ec, "-keyout", "broker.key", "-out", "broker.csr", "-subj", "/CN=broker")
    (d / "ext").write_text("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n")
    openssl("x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "broker.pem", "-days", "2", "-extfile", "ext")
    (d / "keystore.pem").write_text((d / "broker.key").read_text() + (d / "broker.pem").read_text())


def secure_settings(pki: Path) -> tuple[dict, dict]:
    """(broker overrides, client config) of the SASL_SSL cluster."""
    broker = {"listeners": "SASL_SSL://127.0.0.1:0", "inter.broker.listener.name": "SASL_SSL",
              "sasl.enabled.mechanisms": "SCRAM-SHA-512",
              "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
              "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
              "ssl.keystore.location": str(pki / "keystore.pem"),
              "ssl.truststore.location": str(pki / "ca.pem"), "ssl.client.auth": "required"}
    client = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
              "sasl.username": "admin", "sasl.password": "admin-secret",
              "ssl.ca.location": str(pki / "ca.pem"), "ssl.certificate.location": str(pki / "broker.pem"),
              "ssl.key.location": str(pki / "broker.key")}
    return broker, client


def produce_run(client: dict, topic: str, count: int) -> float:
    """Records per second for `count` acks=all records, all acknowledged."""
    admin = AdminClient(client)
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3,
                                  config={"min.insync.replicas": "2"})])[topic].result(60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        partition = admin.list_topics(topic, timeout=10).topics[topic].partitions.get(0)
        if partition is not None and partition.leader >= 0 and len(partition.isrs) == 3:
            break
        time.sleep(0.1)
    producer = confluent_kafka.Producer({**client, "acks": "all", "linger.ms": 5, "batch.size": 65536})
    failed = []
    started = time.monotonic()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, RECORD, on_delivery=lambda err, _m: err and failed.append(err))
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    elapsed = time.monotonic() - started
    if failed:
        raise RuntimeError(f"{len(failed)} records not acknowledged: {failed[0]}")
    return count / elapsed


def run_cluster(root: Path, zookeeper: ZooKeeperProcess, name: str, overrides: dict, client: dict,
                args) -> list[float]:
    zk_connect = f"{zookeeper.connect_string}/{name}-{uuid.uuid4().hex[:8]}"
    if name == "SASL_SSL":
        from logbroker.metadata.zookeeper_store import ensure_chroot
        ensure_chroot(zk_connect, timeout_s=30)
        subprocess.run([sys.executable, "-m", "logbroker.cli", "users", "--zookeeper", zk_connect,
                        "--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]"],
                       check=True, capture_output=True, timeout=60)
    with ClusterProcess(root / name, zk_connect=zk_connect, overrides=overrides) as cluster:
        config = {**client, "bootstrap.servers": cluster.bootstrap}
        rates = [produce_run(config, f"bench-{i}", args.records) for i in range(args.reps)]
    say(f"{name}: {', '.join(f'{r:,.0f}' for r in rates)} records/s")
    return rates


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-secure-") as tmp:
        root = Path(tmp)
        (root / "pki").mkdir()
        make_pki(root / "pki")
        secure_broker, secure_client = secure_settings(root / "pki")
        print(machine_info(root))
        with ZooKeeperProcess(root / "zookeeper") as zookeeper:
            plain = run_cluster(root, zookeeper, "PLAINTEXT", {}, {}, args)
            secure = run_cluster(root, zookeeper, "SASL_SSL", secure_broker, secure_client, args)
    rows = [(name, f"{median(r):,.0f}", f"{median(r) * len(RECORD) / 2**20:.1f}")
            for name, r in (("PLAINTEXT", plain), ("SASL_SSL + SCRAM-SHA-512 + mTLS", secure))]
    print(f"RF=3, acks=all, {args.records} × 1 KiB records, median of {args.reps}:\n")
    print(table(["cluster (clients and inter-broker)", "records/s", "MiB/s"], rows))
    print(f"\nSASL_SSL / PLAINTEXT: {median(secure) / median(plain):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
