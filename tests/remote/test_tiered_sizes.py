"""Local versus remote size per partition of a tiered topic: `logbroker topics --describe` and the
web console's topic page show the leader's local `.log` bytes and the bucket's segments (bytes,
count, offsets), equal to what the data dir and moto's bucket hold; a non-tiered topic is
described as before, and Kafka's clients (kafka-python, `logbroker log-dirs`' Kafka JSON) read
the broker's DescribeLogDirs answers as they always did."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
import uuid
from pathlib import Path

from kafka import KafkaAdminClient

from logbroker.testing import TEST_OVERRIDES, BrokerProcess, ClusterProcess

from clients import TIMEOUT_S, Spec, create_topic, produce_confluent
from tiered_helpers import wait_until

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "console"))
from console_helpers import ConsoleProcess  # noqa: E402

TIERED = {"remote.storage.enable": "true", "segment.bytes": "8192", "local.retention.bytes": "16384",
          "file.delete.delay.ms": "0"}
PARTITIONS = 2
FIELDS = re.compile(r"(\w+): (\S*)")


def run(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "logbroker.cli", *args, "--bootstrap-server", bootstrap],
                          capture_output=True, text=True, timeout=90)


def on_disk(data_dir: Path, topic: str, partition: int) -> dict:
    """The local log as the data dir holds it: `.log` bytes and the first segment's base offset."""
    logs = sorted((data_dir / f"{topic}-{partition}").glob("*.log"))
    return {"LocalSize": str(sum(p.stat().st_size for p in logs)), "first": int(logs[0].stem)}


def in_bucket(bucket, topic: str, partition: int) -> dict[str, str]:
    """The copied segments in the bucket: their `.log` objects' sizes, count and offset range."""
    sizes, token = {}, None
    while True:
        page = bucket.client.list_objects_v2(Bucket=bucket.name, Prefix=f"cluster-a/{topic}-{partition}-",
                                             **({"ContinuationToken": token} if token else {}))
        sizes.update({o["Key"]: o["Size"] for o in page.get("Contents", [])})
        token = page.get("NextContinuationToken")
        if not token:
            break
    copied = [m for m in (json.loads(bucket.get(k)) for k in sizes if k.endswith(".metadata"))
              if m["state"] == "COPY_SEGMENT_FINISHED"]
    log_bytes = [size for key, size in sizes.items()
                 if any(key.endswith(f"{m['start_offset']:020d}-{m['segment_id']}.log") for m in copied)]
    assert len(log_bytes) == len(copied)
    offsets = f"{min(m['start_offset'] for m in copied)}-{max(m['end_offset'] for m in copied)}" if copied else "none"
    return {"RemoteSize": str(sum(log_bytes)), "RemoteSegments": str(len(copied)), "RemoteOffsets": offsets}


def described(bootstrap: str, topic: str) -> dict[int, dict[str, str]]:
    result = run(bootstrap, "topics", "--describe", "--topic", topic)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    lines = [dict(FIELDS.findall(line)) for line in result.stdout.splitlines() if line.startswith("\t")]
    return {int(fields["Partition"]): fields for fields in lines}


def expected(data_dir: Path, bucket, topic: str, partition: int) -> dict[str, str]:
    disk = on_disk(data_dir, topic, partition)
    return {"LocalSize": disk["LocalSize"], **in_bucket(bucket, topic, partition)}


def settled(bootstrap: str, leader_dirs: dict[int, Path], bucket, topic: str):
    """The tool's lines once every partition has tiered its history and deleted it locally
    (the first local segment is past offset 0) and the numbers agree with its leader's data dir
    (`leader_dirs`: partition → dir) and the bucket before and after the tool ran (nothing moved
    meanwhile); else None."""
    before = {p: expected(d, bucket, topic, p) for p, d in leader_dirs.items()}
    if any(on_disk(d, topic, p)["first"] == 0 or before[p]["RemoteSegments"] == "0"
           for p, d in leader_dirs.items()):
        return None
    lines = described(bootstrap, topic)
    after = {p: expected(d, bucket, topic, p) for p, d in leader_dirs.items()}
    if before != after or any({k: lines[p].get(k) for k in before[p]} != before[p] for p in leader_dirs):
        return None
    return lines, after


def test_describe_and_the_console_show_local_and_remote_sizes_of_each_partition(tmp_path, bucket):
    broker = BrokerProcess(tmp_path / "broker", overrides={
        **TEST_OVERRIDES, **bucket.broker_overrides(), "remote.log.manager.task.interval.ms": "100"}).start()
    try:
        create_topic(broker.bootstrap, "tiered", partitions=PARTITIONS, config=TIERED)
        create_topic(broker.bootstrap, "plain")
        produce_confluent(broker.bootstrap, "tiered",
                          [Spec(i % PARTITIONS, f"k{i}".encode(), b"v" * 120) for i in range(3000)],
                          **{"batch.size": 2048, "linger.ms": 5})
        produce_confluent(broker.bootstrap, "plain", [Spec(0, b"k", b"v" * 100) for _ in range(50)])

        dirs = dict.fromkeys(range(PARTITIONS), broker.data_dir)
        lines, truth = wait_until(lambda: settled(broker.bootstrap, dirs, bucket, "tiered"),
                                  "history tiered and sizes settled")
        for p in range(PARTITIONS):
            assert int(truth[p]["RemoteSegments"]) >= 5
            start, end = map(int, truth[p]["RemoteOffsets"].split("-"))
            assert start == 0 and end + 1 >= on_disk(broker.data_dir, "tiered", p)["first"]  # no gap below local
            assert list(lines[p]) == ["Topic", "Partition", "Leader", "Replicas", "Isr", "LocalSize",
                                      "RemoteSize", "RemoteSegments", "RemoteOffsets"]

        # A topic that is not tiered is described as Kafka's tool describes it.
        plain = run(broker.bootstrap, "topics", "--describe", "--topic", "plain").stdout.splitlines()
        assert plain[1] == "\tTopic: plain\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0"

        # Kafka's clients read the answers that carry the remote log as before: kafka-python...
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="tests-tiered-sizes")
        try:
            (answer,) = admin.describe_log_dirs()
        finally:
            admin.close()
        sizes = {p["partition_index"]: p["partition_size"] for d in answer["log_dirs"] for t in d["topics"]
                 if t["name"] == "tiered" for p in t["partitions"]}
        assert sizes == {p: int(truth[p]["LocalSize"]) for p in range(PARTITIONS)}
        # ...and kafka-log-dirs' JSON has Kafka's keys only.
        log_dirs = run(broker.bootstrap, "log-dirs", "--describe", "--topic-list", "tiered")
        document = json.loads(log_dirs.stdout.splitlines()[-1])
        [entries] = [d["partitions"] for b in document["brokers"] for d in b["logDirs"]]
        assert {e["partition"]: e["size"] for e in entries} == {f"tiered-{p}": int(truth[p]["LocalSize"])
                                                                 for p in range(PARTITIONS)}
        assert all(set(e) == {"partition", "size", "offsetLag", "isFuture"} for e in entries)

        with ConsoleProcess(broker.bootstrap) as console:
            with urllib.request.urlopen(console.url + "/topics/tiered?tab=partitions", timeout=TIMEOUT_S) as r:
                page = r.read().decode()
            with urllib.request.urlopen(console.url + "/topics/plain?tab=partitions", timeout=TIMEOUT_S) as r:
                plain_page = r.read().decode()
        for p in range(PARTITIONS):
            row = re.search(rf'<tr data-partition="{p}">(.*?)</tr>', page, re.S).group(1)
            assert re.search(r'class="n local-size" data-bytes="(\d+)"', row).group(1) == truth[p]["LocalSize"]
            assert re.search(r'class="n remote-size" data-bytes="(\d+)"', row).group(1) == truth[p]["RemoteSize"]
            assert re.search(r'class="n remote-segments">(\d+)<', row).group(1) == truth[p]["RemoteSegments"]
            assert re.search(r'class="n remote-offsets">(\d+)–(\d+)<', row).group(1, 2) == \
                tuple(truth[p]["RemoteOffsets"].split("-"))
        assert "Remote size" in page and "Remote size" not in plain_page and "local-size" not in plain_page
    finally:
        broker.stop()


def test_in_a_cluster_each_partition_shows_its_leaders_sizes(
        tmp_path, bucket, logbroker_zookeeper):
    cluster = ClusterProcess(tmp_path, brokers=2,
                             zk_connect=f"{logbroker_zookeeper.connect_string}/t-{uuid.uuid4().hex[:12]}",
                             overrides={**bucket.broker_overrides(), "remote.log.manager.task.interval.ms": "100"})
    with cluster:
        # One replica each, on different brokers: a partition's sizes come from the one broker
        # that leads it, asked over its own connection.
        cluster.create_topic("tiered", partitions=PARTITIONS, replication_factor=1, config=TIERED)
        produce_confluent(cluster.bootstrap, "tiered",
                          [Spec(i % PARTITIONS, f"k{i}".encode(), b"v" * 120) for i in range(2000)],
                          **{"batch.size": 2048, "linger.ms": 5, "acks": "all"})
        leaders = {p: cluster.leader("tiered", p) for p in range(PARTITIONS)}
        assert sorted(leaders.values()) == [1, 2]  # one partition led by each broker
        dirs = {p: cluster.brokers[b].data_dir for p, b in leaders.items()}
        lines, truth = wait_until(lambda: settled(cluster.bootstrap, dirs, bucket, "tiered"),
                                  "history tiered and sizes settled")
        for p in range(PARTITIONS):
            assert lines[p]["Leader"] == str(leaders[p])
            assert int(truth[p]["RemoteSegments"]) >= 3 and truth[p]["RemoteOffsets"].startswith("0-")
