"""Tiered storage benchmark: what copying segments to an S3 bucket costs the broker, and a consumer's
replay from offset 0 out of the bucket against the same replay from local disk.

    .venv/bin/python bench/bench_tiered.py            # ~1 min (--mb to change the volume)

One broker with remote.log.storage.system.enable and moto's S3 server (a Python process on
127.0.0.1: its speed, not S3's, bounds the remote numbers here). A tiered topic (segment.bytes
8 MiB, local.retention.bytes one segment) and a plain one get the same records; then:

- copy: from the end of the produce until every closed segment is in the bucket, MB/s and the
  broker's CPU-seconds per GB copied (from /proc, during the copy alone);
- replay: a confluent-kafka consumer from offset 0 to the end, MB/s, on the tiered topic (all but
  the last segment read from the bucket) and on the plain one (page cache);
- store requests per GB, from the broker's own metrics: segment copies and remote fetches, and
  the PUTs and GETs they mean (each copy: one PUT per file, the .log in 16 MiB parts; each remote
  fetch one ranged GET of READ_AHEAD_BYTES or less).
Prints Markdown.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_metrics import cpu_seconds  # noqa: E402
from common import say, table  # noqa: E402

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from logbroker.testing import TEST_OVERRIDES, BrokerProcess  # noqa: E402

VALUE = b"x" * 1000
SEGMENT = 8 << 20


def scrape(broker: BrokerProcess) -> dict[str, float]:
    address = re.search(r"Metrics endpoint listening on (http://\S+/metrics)", broker.new_log_text()).group(1)
    with urllib.request.urlopen(address, timeout=10) as response:
        text = response.read().decode()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line and not line.startswith("#")}


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                         "queue.buffering.max.messages": 500_000, "compression.type": "none"})
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, VALUE, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0


def replay(bootstrap: str, topic: str, count: int) -> float:
    """Seconds to read `count` records from offset 0."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                         "fetch.max.bytes": 64 << 20, "max.partition.fetch.bytes": 16 << 20})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen, start = 0, time.perf_counter()
    while seen < count:
        for msg in consumer.consume(10_000, timeout=1):
            assert msg.error() is None, msg.error()
            seen += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=400, help="MB produced to each topic")
    args = parser.parse_args()
    count = args.mb * 1_000_000 // len(VALUE)
    from moto.server import ThreadedMotoServer
    import boto3
    import logging
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_REGION="us-east-1")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket="bench-tiered")
    with tempfile.TemporaryDirectory(prefix="bench-tiered-") as root:
        broker = BrokerProcess(Path(root), overrides={
            **TEST_OVERRIDES, "metrics.port": "0", "remote.log.storage.system.enable": "true",
            "remote.log.storage.manager.class.name": "s3", "rsm.config.s3.bucket": "bench-tiered",
            "rsm.config.s3.endpoint": endpoint, "remote.log.manager.task.interval.ms": "200"}).start()
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            futures = admin.create_topics([
                NewTopic("tiered", 1, 1, config={"remote.storage.enable": "true", "segment.bytes": str(SEGMENT),
                                                 "local.retention.bytes": str(SEGMENT)}),
                NewTopic("plain", 1, 1, config={"segment.bytes": str(SEGMENT)})])
            for future in futures.values():
                future.result(30)
            produce(broker.bootstrap, "plain", count)
            produce(broker.bootstrap, "tiered", count)
            cpu0, t0 = cpu_seconds(broker.process.pid), time.perf_counter()
            lag = 'kafka_server_brokertopicmetrics_remotecopylagsegments{topic="tiered"}'
            while scrape(broker).get(lag, 1) > 0:
                time.sleep(0.1)
            copy_s, copy_cpu = time.perf_counter() - t0, cpu_seconds(broker.process.pid) - cpu0
            metrics = scrape(broker)
            copied = metrics["kafka_server_brokertopicmetrics_remotecopybytes_total"]
            segments = metrics["kafka_server_brokertopicmetrics_remotecopyrequests_total"]
            local_s = replay(broker.bootstrap, "plain", count)
            remote_s = replay(broker.bootstrap, "tiered", count)
            metrics = scrape(broker)
            fetches = metrics["kafka_server_brokertopicmetrics_remotefetchrequests_total"]
            fetched = metrics["kafka_server_brokertopicmetrics_remotefetchbytes_total"]
        finally:
            broker.stop()
            server.stop()
    gb = copied / 1e9
    puts_per_gb = segments * (5 + -(-SEGMENT // (16 << 20))) / gb
    say(table(["measure", "value"], [
        ["copied to the bucket", f"{copied / 1e6:.0f} MB in {segments:.0f} segments"],
        ["copy throughput (backlog after the produce)", f"{copied / 1e6 / copy_s:.0f} MB/s"],
        ["broker CPU per GB copied", f"{copy_cpu / gb:.2f} CPU-s"],
        ["replay from offset 0, local disk", f"{args.mb / local_s:.0f} MB/s"],
        ["replay from offset 0, from the bucket", f"{args.mb / remote_s:.0f} MB/s"],
        ["PUT requests per GB copied", f"{puts_per_gb:.0f}"],
        ["remote fetches (ranged GETs at most) per GB read", f"{fetches / (fetched / 1e9):.0f}"],
    ]))


if __name__ == "__main__":
    main()
