"""Tiered storage benchmark and acceptance run: what copying segments to an S3 bucket costs the
broker and the store, a replay from offset 0 out of the bucket against the same replay from local
disk, and checks that nothing was lost, duplicated or left unreadable on the way.

    .venv/bin/python bench/bench_tiered.py --mb 200      # ~2 min
    .venv/bin/python bench/bench_tiered.py --mb 2000     # the 2 GB acceptance run

One broker with remote.log.storage.system.enable, and moto's S3 server in its own process on
127.0.0.1 counting every request it receives (bench/s3_requests.py): its speed, not S3's, bounds
the remote numbers, and the floor below shows by how much. Two topics of one partition,
segment.bytes --segment-mb: `plain`, and `tiered` with local.retention.bytes of
--local-segments segments. In order:

1. produce --mb MB (1000-byte records, acks=all, idempotent) to `plain`: produce MB/s and the
   broker's CPU-s per GB without tiering;
2. two transactional producers write interleaved transactions to `tiered`, every other
   transaction of B aborted; then the same --mb MB of records (copies run meanwhile, as they do
   in use; with --tier-after-produce the topic is tiered only after the produce, so that the copy
   is measured alone); copy MB/s and the broker's CPU-s per GB until every closed segment is in
   the bucket; store requests counted meanwhile;
3. checks: the local directory holds only the tail (Kafka's local.retention.bytes rule), the
   bucket every closed segment from offset 0 on, each remote .log dumped by
   `logbroker dump-log s3://…` (all, or --dump-sample of them) with valid, contiguous batches;
4. replay from offset 0 of `plain` (local disk) and of `tiered` (the bucket, then the local
   tail), every record compared with the one produced at its place; store requests counted;
5. a read_committed consumer over the transactions (now remote) sees the committed records in
   order and none of the aborted ones;
6. the floor: the plain topic's segment files PUT to another bucket and read back in ranged GETs
   with obstore alone, as the broker does it, nothing of ours in between.
Prints Markdown.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_metrics import cpu_seconds  # noqa: E402
from common import machine_info, say, table  # noqa: E402
from s3_requests import CLASS_A, CLASS_B, CountingS3Server, classes, dollars, floor  # noqa: E402
from tiered_checks import (  # noqa: E402
    bucket_segments,
    check_bucket,
    dump_remote_logs,
    local_segments,
    local_tail_holds,
    plain_values,
    produce,
    produce_transactions,
    read_in_order,
    replay,
    sha256_of,
)

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic  # noqa: E402

from logbroker.remote.remote_log_reads import READ_AHEAD_BYTES  # noqa: E402
from logbroker.remote.storage_manager import PART_BYTES, PARTS_IN_FLIGHT  # noqa: E402
from logbroker.testing import TEST_OVERRIDES, BrokerProcess, wait_for  # noqa: E402

BUCKET, FLOOR_BUCKET = "bench-tiered", "bench-floor"
TRANSACTIONS = 20  # of 1000 records each (A 500, B 500): 40 MB at the start of the tiered topic
LAG = 'kafka_server_brokertopicmetrics_remotecopylagsegments{topic="tiered"}'


def scrape(broker: BrokerProcess) -> dict[str, float]:
    address = re.search(r"Metrics endpoint listening on (http://\S+/metrics)", broker.new_log_text()).group(1)
    with urllib.request.urlopen(address, timeout=10) as response:
        text = response.read().decode()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line and not line.startswith("#")}


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def create_topics(admin: AdminClient, segment: int, local_retention: int, tiered_now: bool) -> None:
    tiering = {"remote.storage.enable": "true", "local.retention.bytes": str(local_retention)} if tiered_now else {}
    futures = admin.create_topics([NewTopic("tiered", 1, 1, config={"segment.bytes": str(segment), **tiering}),
                                   NewTopic("plain", 1, 1, config={"segment.bytes": str(segment)})])
    for future in futures.values():
        future.result(30)


def turn_tiering_on(admin: AdminClient, local_retention: int) -> None:
    resource = ConfigResource("topic", "tiered", incremental_configs=[
        ConfigEntry("remote.storage.enable", "true", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("local.retention.bytes", str(local_retention), incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def requests_table(copy, copy_gb: float, replay, replay_gb: float, floor_counts) -> str:
    kinds = sorted(set(copy) | set(replay) | set(floor_counts))
    rows = [[k, copy[k], f"{copy[k] / copy_gb:.1f}", replay[k], f"{replay[k] / replay_gb:.1f}", floor_counts[k]]
            for k in kinds]
    for label, pick in (("class A (PUT, POST, COPY, LIST)", 0), ("class B (GET, HEAD)", 1)):
        c, r, f = classes(copy)[pick], classes(replay)[pick], classes(floor_counts)[pick]
        rows.append([f"**{label}**", c, f"{c / copy_gb:.1f}", r, f"{r / replay_gb:.1f}", f])
    rows.append(["**S3 Standard price, USD**", f"{dollars(copy):.5f}", f"{dollars(copy) / copy_gb:.5f}",
                 f"{dollars(replay):.5f}", f"{dollars(replay) / replay_gb:.5f}", f"{dollars(floor_counts):.5f}"])
    return table(["request", "copy", "per GB copied", "replay", "per GB read remotely", "floor"], rows)


def main() -> None:  # noqa: PLR0915 - one run, in the order of the docstring
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=400, help="MB produced to each topic")
    parser.add_argument("--segment-mb", type=int, default=16, help="segment.bytes in MiB")
    parser.add_argument("--local-segments", type=int, default=3, help="local.retention.bytes in segments")
    parser.add_argument("--dump-sample", type=int, default=0, help="remote .log files to dump-log (0: all)")
    parser.add_argument("--tier-after-produce", action="store_true",
                        help="turn remote.storage.enable on after the produce: the copy measured alone")
    args = parser.parse_args()
    count = args.mb * 1_000_000 // 1000
    segment, local_retention = args.segment_mb << 20, (args.segment_mb << 20) * args.local_segments
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_REGION="us-east-1")
    import boto3

    load_before, started = loadavg(), time.perf_counter()
    r = {}
    with CountingS3Server() as s3_server, tempfile.TemporaryDirectory(prefix="bench-tiered-") as root:
        endpoint = s3_server.endpoint
        s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        for name in (BUCKET, FLOOR_BUCKET):
            s3.create_bucket(Bucket=name)
        broker = BrokerProcess(Path(root), overrides={
            **TEST_OVERRIDES, "metrics.port": "0", "remote.log.storage.system.enable": "true",
            "remote.log.storage.manager.class.name": "s3", "rsm.config.s3.bucket": BUCKET,
            "rsm.config.s3.endpoint": endpoint, "remote.log.manager.task.interval.ms": "200",
            "log.retention.check.interval.ms": "1000"}).start()
        try:
            pid, bootstrap = broker.process.pid, broker.bootstrap
            admin = AdminClient({"bootstrap.servers": bootstrap})
            create_topics(admin, segment, local_retention, tiered_now=not args.tier_after_produce)
            say("1. produce to plain")
            cpu0, t0 = cpu_seconds(pid), time.perf_counter()
            _, plain_sha = produce(bootstrap, "plain", plain_values(count))
            r["plain_produce_s"], r["plain_cpu"] = time.perf_counter() - t0, cpu_seconds(pid) - cpu0
            say("2. transactions, then produce to tiered")
            stretch, committed = produce_transactions(bootstrap, "tiered", TRANSACTIONS)
            counts0, moto0 = s3_server.counts(), cpu_seconds(s3_server.pid)
            cpu0, t0 = cpu_seconds(pid), time.perf_counter()
            _, tiered_sha = produce(bootstrap, "tiered", plain_values(count))
            r["tiered_produce_s"] = time.perf_counter() - t0
            if args.tier_after_produce:
                r["tiered_produce_cpu"] = cpu_seconds(pid) - cpu0
                cpu0, t0 = cpu_seconds(pid), time.perf_counter()
                turn_tiering_on(admin, local_retention)
            copy_lag_after_produce = scrape(broker).get(LAG, -1)
            wait_for(lambda: scrape(broker).get(LAG, 1) == 0, 1800, 0.1, what="every closed segment copied")
            r["copy_s"], r["copy_cpu"] = time.perf_counter() - t0, cpu_seconds(pid) - cpu0
            r["moto_copy_cpu"] = cpu_seconds(s3_server.pid) - moto0
            copy_counts = s3_server.counts() - counts0
            metrics = scrape(broker)
            copied = metrics["kafka_server_brokertopicmetrics_remotecopybytes_total"]
            say("3. checks of the local tail and the bucket")
            tiered_dir = broker.data_dir / "tiered-0"
            wait_for(lambda: local_tail_holds(tiered_dir, local_retention), 120, 0.5, what="local retention")
            local = local_segments(tiered_dir)
            segments, sizes = bucket_segments(s3, BUCKET)
            check_bucket(segments, sizes, local)
            stretch_end = len(stretch) + 2 * TRANSACTIONS  # records and the transaction markers
            assert stretch_end < local[0][0], \
                f"the transactions end at {stretch_end}, the local log starts at {local[0][0]}"
            txn_indexed = sum(1 for m in segments if m.has_txn_index)
            assert txn_indexed, "no remote segment has a .txnindex"
            sample = segments if args.dump_sample == 0 else segments[:: max(1, len(segments) // args.dump_sample)]
            t0 = time.perf_counter()
            batches = dump_remote_logs(endpoint, BUCKET, sample)
            dump_s = time.perf_counter() - t0
            say("4. replays")
            counts1, fetched0 = s3_server.counts(), scrape(broker).get(
                "kafka_server_brokertopicmetrics_remotefetchbytes_total", 0)
            local_s = replay(bootstrap, "plain", count)
            remote_s = replay(bootstrap, "tiered", len(stretch) + count)
            remote_fetched = scrape(broker)["kafka_server_brokertopicmetrics_remotefetchbytes_total"] - fetched0
            local_read = read_in_order(bootstrap, "plain", plain_values(count), count)
            remote_read = read_in_order(bootstrap, "tiered", itertools.chain(stretch, plain_values(count)),
                                        len(stretch) + count)
            replay_counts = s3_server.counts() - counts1
            fetched = scrape(broker)["kafka_server_brokertopicmetrics_remotefetchbytes_total"] - fetched0
            say("5. read_committed over the remote transactions")
            committed_read = read_in_order(bootstrap, "tiered", itertools.chain(committed, plain_values(1)),
                                           len(committed) + 1, isolation="read_committed")
            say("6. the floor")
            files = [broker.data_dir / "plain-0" / f"{base:020d}.log" for base, _ in local_segments(
                broker.data_dir / "plain-0")[:-1]]
            counts2 = s3_server.counts()
            floor_put, floor_get, floor_bytes = floor(endpoint, FLOOR_BUCKET, files, part_bytes=PART_BYTES,
                                                      parts_in_flight=PARTS_IN_FLIGHT, range_bytes=READ_AHEAD_BYTES)
            floor_counts = s3_server.counts() - counts2
        finally:
            broker.stop()
    load_after = loadavg()
    expected_sha = sha256_of(itertools.chain(stretch, plain_values(count)))
    assert remote_read.sha256 == expected_sha and local_read.sha256 == plain_sha == tiered_sha
    gb, copy_gb = args.mb / 1000, copied / 1e9
    machine = machine_info(tempfile.gettempdir())
    say(f"\n`bench/bench_tiered.py --mb {args.mb} --segment-mb {args.segment_mb} --local-segments "
        f"{args.local_segments}{' --tier-after-produce' if args.tier_after_produce else ''}`: "
        f"{machine.nproc} × {machine.cpu_model}, {machine.ram_gib:.0f} GiB, Python {machine.python}; "
        f"load average {load_before} before, {load_after} after; {time.perf_counter() - started:.0f} s in all.\n")
    copy_label = ("copy of the backlog, after tiering was turned on" if args.tier_after_produce else
                  f"copy, from the first record until the bucket caught up ({copy_lag_after_produce:.0f} "
                  "segments behind at the last ack)")
    tiered_cpu_label = ("broker CPU per GB, produce to the tiered topic (tiering off)" if args.tier_after_produce
                        else "broker CPU per GB, produce to the tiered topic + copy")
    rows = [
        ["produce, plain topic (acks=all)", f"{args.mb / r['plain_produce_s']:.0f} MB/s"],
        ["produce, tiered topic (acks=all" + (")" if args.tier_after_produce else ", copies running)"),
         f"{args.mb / r['tiered_produce_s']:.0f} MB/s"],
        [copy_label, f"{copied / 1e6:.0f} MB in {len(segments)} segments, {copied / 1e6 / r['copy_s']:.0f} MB/s"],
        ["broker CPU per GB, produce to the plain topic", f"{r['plain_cpu'] / gb:.2f} CPU-s"],
    ]
    if args.tier_after_produce:
        rows += [[tiered_cpu_label, f"{r['tiered_produce_cpu'] / gb:.2f} CPU-s"],
                 ["broker CPU per GB copied", f"{r['copy_cpu'] / copy_gb:.2f} CPU-s"]]
    else:
        rows += [[tiered_cpu_label, f"{r['copy_cpu'] / gb:.2f} CPU-s"],
                 ["broker CPU per GB copied (the difference)",
                  f"{(r['copy_cpu'] - r['plain_cpu']) / copy_gb:.2f} CPU-s"]]
    rows += [
        ["moto's CPU per GB copied (the store)", f"{r['moto_copy_cpu'] / copy_gb:.2f} CPU-s"],
        ["replay from offset 0, local disk (plain)", f"{local_read.bytes / 1e6 / local_s:.0f} MB/s"],
        ["replay from offset 0, bucket then local tail (tiered)",
         f"{remote_read.bytes / 1e6 / remote_s:.0f} MB/s ({remote_fetched / 1e6:.0f} MB from the bucket)"],
        ["the same replays, every record compared (Python-bound)",
         f"local {local_read.bytes / 1e6 / local_read.seconds:.0f} MB/s, "
         f"tiered {remote_read.bytes / 1e6 / remote_read.seconds:.0f} MB/s"],
        ["floor: obstore PUT to moto, same segment files, same parts",
         f"{floor_put:.0f} MB/s ({floor_bytes / 1e6:.0f} MB)"],
        [f"floor: obstore ranged GETs of {READ_AHEAD_BYTES >> 20} MiB from moto", f"{floor_get:.0f} MB/s"],
    ]
    say(table(["measure", "value"], rows))
    say("\nStore requests, as moto received them (the floor: obstore alone, same bytes):\n")
    say(requests_table(copy_counts, copy_gb, replay_counts, fetched / 1e9, floor_counts))
    say(f"\n(replay: the two replays of the tiered topic, {fetched / 1e6:.0f} MB read from the bucket; the "
        "consumers ask up to 16 MiB a partition, so ranged GETs are up to 16 MiB.)")
    say("\nChecks (each would have stopped the run):\n")
    say(table(["check", "result"], [
        ["local dir holds only the tail", f"{len(local)} segments, {sum(s for _, s in local) / 1e6:.0f} MB, "
         f"from offset {local[0][0]} (local.retention.bytes {local_retention / 1e6:.0f} MB)"],
        ["bucket holds every closed segment", f"{len(segments)} segments, offsets 0…{segments[-1].end_offset}, "
         f"no gap, all files present; {txn_indexed} with a .txnindex"],
        ["remote .log files read by `logbroker dump-log s3://…`",
         f"{len(sample)} of {len(segments)}: {batches} batches, all valid and contiguous ({dump_s:.0f} s)"],
        ["consumer from offset 0, plain (local)", f"{local_read.records} records once, in order; "
         f"sha256 {local_read.sha256[:16]} = produced {plain_sha[:16]}"],
        ["consumer from offset 0, tiered (read_uncommitted)", f"{remote_read.records} records once, in order "
         f"({len(stretch)} transactional, {count} plain; last offset {remote_read.last_offset}); "
         f"sha256 {remote_read.sha256[:16]} = produced {expected_sha[:16]}"],
        ["read_committed over the remote transactions", f"{committed_read.records - 1} committed records in "
         f"order, none of the {len(stretch) - len(committed)} aborted (offsets 0…{stretch_end - 1})"],
    ]))
    kinds = ", ".join(CLASS_A + CLASS_B)
    say(f"\n(Request kinds priced: {kinds}; DELETE free.)")


if __name__ == "__main__":
    main()
