"""`logbroker perf produce|consume`: kafka-producer-perf-test and kafka-consumer-perf-test.

    logbroker perf produce --topic t --num-records 1000000 --record-size 100 --throughput -1 \\
        --producer-props acks=1 linger.ms=5 batch.size=65536
    logbroker perf consume --topic t --messages 1000000

The output lines are Kafka's, so scripts that parse Kafka's perf tools parse these: the producer
prints a window line every 5 s and then
`N records sent, X records/sec (Y MB/sec), A ms avg latency, M ms max latency, p50 ms 50th, …`;
the consumer prints Kafka's CSV header and one line of totals. On a terminal a progress bar
runs under the lines.
"""

from __future__ import annotations

import random
import time
from array import array
from datetime import datetime

import click

from logbroker.cli.common import (
    Progress,
    VariadicOptionCommand,
    bootstrap_option,
    ensure_reachable,
    client_config,
    error_sentence,
    fail,
    fail_with,
    load_properties_file,
    parse_key_values,
    unreachable,
)

MB = 1024 * 1024
REPORTING_INTERVAL_MS = 5000
MAX_LATENCY_SAMPLES = 500_000


class ProducerStats:
    """Kafka ProducerPerformance's Stats: totals, a window printed every reporting interval, and
    latencies sampled evenly (at most MAX_LATENCY_SAMPLES) for the percentiles.

    Times are milliseconds from an injected clock reading, so the arithmetic is testable.
    """

    def __init__(self, num_records: int, start_ms: float,
                 reporting_interval_ms: int = REPORTING_INTERVAL_MS) -> None:
        self.start_ms = start_ms
        self.reporting_interval_ms = reporting_interval_ms
        self.sampling = max(1, num_records // min(max(num_records, 1), MAX_LATENCY_SAMPLES))
        self.latencies = array("i")
        self.iteration = 0
        self.count = 0
        self.bytes = 0
        self.total_latency = 0
        self.max_latency = 0
        self._new_window(start_ms)

    def _new_window(self, now_ms: float) -> None:
        self.window_start_ms = now_ms
        self.window_count = 0
        self.window_bytes = 0
        self.window_total_latency = 0
        self.window_max_latency = 0

    def record(self, latency_ms: int, size: int, now_ms: float) -> str | None:
        """Count one acknowledged record; returns the window line when a window closes."""
        self.count += 1
        self.bytes += size
        self.total_latency += latency_ms
        self.max_latency = max(self.max_latency, latency_ms)
        self.window_count += 1
        self.window_bytes += size
        self.window_total_latency += latency_ms
        self.window_max_latency = max(self.window_max_latency, latency_ms)
        if self.iteration % self.sampling == 0:
            self.latencies.append(latency_ms)
        self.iteration += 1
        if now_ms - self.window_start_ms >= self.reporting_interval_ms:
            line = self.window_line(now_ms)
            self._new_window(now_ms)
            return line
        return None

    def window_line(self, now_ms: float) -> str:
        elapsed = max(now_ms - self.window_start_ms, 1e-9)
        count = max(self.window_count, 1)
        return (f"{self.window_count} records sent, {1000.0 * self.window_count / elapsed:.1f} "
                f"records/sec ({1000.0 * self.window_bytes / elapsed / MB:.2f} MB/sec), "
                f"{self.window_total_latency / count:.1f} ms avg latency, "
                f"{float(self.window_max_latency):.1f} ms max latency.")

    def total_line(self, now_ms: float) -> str:
        elapsed = max(now_ms - self.start_ms, 1e-9)
        p50, p95, p99, p999 = self.percentiles(0.5, 0.95, 0.99, 0.999)
        return (f"{self.count} records sent, {1000.0 * self.count / elapsed:f} records/sec "
                f"({1000.0 * self.bytes / elapsed / MB:.2f} MB/sec), "
                f"{self.total_latency / max(self.count, 1):.2f} ms avg latency, "
                f"{float(self.max_latency):.2f} ms max latency, {p50} ms 50th, {p95} ms 95th, "
                f"{p99} ms 99th, {p999} ms 99.9th.")

    def percentiles(self, *fractions: float) -> list[int]:
        ordered = sorted(self.latencies)
        if not ordered:
            return [0] * len(fractions)
        return [ordered[min(int(f * len(ordered)), len(ordered) - 1)] for f in fractions]


class Throttler:
    """Kafka's ThroughputThrottler: sleep so that sends average at most `per_second` records
    per second (no limit when it is negative)."""

    def __init__(self, per_second: float, start_s: float) -> None:
        self.per_second = per_second
        self.start_s = start_s

    def delay_s(self, sent: int, now_s: float) -> float:
        if self.per_second <= 0:
            return 0.0 if self.per_second < 0 else float("inf")
        return max(0.0, self.start_s + sent / self.per_second - now_s)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def perf() -> None:
    """Measure a cluster: kafka-producer-perf-test and kafka-consumer-perf-test."""


@perf.command("produce", cls=VariadicOptionCommand, variadic=["--producer-props"],
              context_settings={"help_option_names": ["-h", "--help"]})
@bootstrap_option
@click.option("--topic", required=True, help="The topic to produce to.")
@click.option("--num-records", type=int, required=True, help="How many records to send.")
@click.option("--record-size", type=int, help="Bytes per record (random A–Z).")
@click.option("--payload-monotonic", is_flag=True,
              help="Use the record number (as text) as payload instead of random bytes.")
@click.option("--throughput", type=float, required=True,
              help="Records per second at most; -1 for no limit.")
@click.option("--producer-props", "producer_props", multiple=True, metavar="KEY=VALUE …",
              help="Producer configs, e.g. acks=1 linger.ms=5 batch.size=65536.")
@click.option("--producer.config", "producer_config", type=click.Path(dir_okay=False),
              help="A properties file of producer configs (--producer-props win).")
def perf_produce(bootstrap_server: str, topic: str, num_records: int, record_size: int | None,
                 payload_monotonic: bool, throughput: float, producer_props: tuple[str, ...],
                 producer_config: str | None) -> None:
    """Send records as fast as allowed and report throughput and latency."""
    from confluent_kafka import KafkaException, Producer

    if (record_size is None) == (not payload_monotonic):
        raise click.UsageError("Exactly one of --record-size and --payload-monotonic is required.")
    if throughput == 0:
        raise click.UsageError("--throughput must be positive, or -1 for no limit.")
    config = client_config(bootstrap_server, {"client.id": "perf-producer-client"},
                           load_properties_file(producer_config, "--producer.config"),
                           parse_key_values(producer_props, "--producer-props"))
    try:
        producer = Producer(config)
    except (KafkaException, ValueError) as e:
        fail(f"Invalid producer config: {error_sentence(e)}")
    ensure_reachable(producer, config)

    # Kafka makes a fresh random payload per record; a pool of them costs Python far less and
    # still defeats compression the same way.
    rng = random.Random(0)
    pool = [bytes(rng.randrange(65, 91) for _ in range(record_size))
            for _ in range(64)] if record_size is not None else []
    clock_ms = lambda: time.monotonic() * 1000.0  # noqa: E731
    stats = ProducerStats(num_records, clock_ms())
    throttler = Throttler(throughput, time.monotonic())
    failures: list[object] = []

    with Progress(num_records, f"producing to {topic}") as progress:
        def on_delivery(err, msg, sent_ms: float) -> None:
            now = clock_ms()
            if err is not None:
                failures.append(err)
                return
            line = stats.record(int(now - sent_ms), len(msg), now)
            if line:
                progress.line(line)

        for i in range(num_records):
            payload = pool[i % len(pool)] if pool else str(i).encode()
            sent_ms = clock_ms()
            while True:
                try:
                    producer.produce(topic, payload,
                                     on_delivery=lambda err, msg, t=sent_ms: on_delivery(err, msg, t))
                    break
                except BufferError:
                    producer.poll(0.05)
            if i % 256 == 0:
                producer.poll(0)
                progress.update(stats.count)
                if failures and unreachable(failures[0], bootstrap_server):
                    break
            delay = throttler.delay_s(i + 1, time.monotonic())
            if delay > 0:
                producer.poll(min(delay, 1.0))
                remaining = throttler.delay_s(i + 1, time.monotonic())
                if remaining > 0:
                    time.sleep(remaining)
        while producer.flush(1.0):
            progress.update(stats.count)
        progress.update(stats.count)
    click.echo(stats.total_line(clock_ms()))
    if failures:
        fail_with(failures[0], bootstrap_server,
                  what=f"{len(failures)} of {num_records} records were not sent")


@perf.command("consume", context_settings={"help_option_names": ["-h", "--help"]})
@bootstrap_option
@click.option("--topic", required=True, help="The topic to consume.")
@click.option("--messages", type=int, required=True, help="How many records to consume.")
@click.option("--group", help="Consumer group id (default: perf-consumer-N).")
@click.option("--from-latest", is_flag=True,
              help="Start at the latest offset when the group has no committed offset.")
@click.option("--fetch-size", type=int, default=1024 * 1024, show_default=True,
              help="max.partition.fetch.bytes.")
@click.option("--timeout", "timeout_ms", type=int, default=10_000, show_default=True,
              help="Longest wait in milliseconds between records before giving up.")
@click.option("--reporting-interval", type=int, default=REPORTING_INTERVAL_MS, show_default=True,
              help="Milliseconds between progress lines (--show-detailed-stats).")
@click.option("--show-detailed-stats", is_flag=True, help="Print a line every reporting interval.")
@click.option("--hide-header", is_flag=True, help="Do not print the header line.")
@click.option("--consumer.config", "consumer_config", type=click.Path(dir_okay=False),
              help="A properties file of consumer configs.")
def perf_consume(bootstrap_server: str, topic: str, messages: int, group: str | None,
                 from_latest: bool, fetch_size: int, timeout_ms: int, reporting_interval: int,
                 show_detailed_stats: bool, hide_header: bool, consumer_config: str | None) -> None:
    """Consume records as fast as possible and report throughput."""
    from confluent_kafka import Consumer, KafkaException

    config = client_config(
        bootstrap_server,
        {"group.id": group or f"perf-consumer-{random.randrange(100_000)}",
         "auto.offset.reset": "latest" if from_latest else "earliest",
         "max.partition.fetch.bytes": str(fetch_size), "client.id": "perf-consumer-client"},
        load_properties_file(consumer_config, "--consumer.config"))
    try:
        consumer = Consumer(config)
    except (KafkaException, ValueError) as e:
        fail(f"Invalid consumer config: {error_sentence(e)}")
    ensure_reachable(consumer, config)

    extra = ", rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
    if not hide_header:
        first = "time, threadId" if show_detailed_stats else "start.time, end.time"
        click.echo(f"{first}, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec{extra}")

    start_ms = time.time() * 1000
    join_ms: list[float] = []
    consumer.subscribe([topic], on_assign=lambda c, parts: join_ms.append(time.time() * 1000))
    read = read_bytes = 0
    last_read = last_bytes = 0
    last_consumed_ms = last_report_ms = start_ms
    fatal = None
    with Progress(messages, f"consuming {topic}") as progress:
        try:
            while read < messages and time.time() * 1000 - last_consumed_ms <= timeout_ms:
                batch = consumer.consume(min(500, messages - read), 0.1)
                now_ms = time.time() * 1000
                for message in batch:
                    error = message.error()
                    if error is not None:
                        if error.fatal():
                            fatal = error
                            break
                        continue
                    read += 1
                    read_bytes += len(message.key() or b"") + len(message.value() or b"")
                    last_consumed_ms = now_ms
                if fatal is not None:
                    break
                if show_detailed_stats and now_ms - last_report_ms >= reporting_interval:
                    progress.line(_detail_line(now_ms, last_report_ms, read, last_read,
                                               read_bytes, last_bytes))
                    last_report_ms, last_read, last_bytes = now_ms, read, read_bytes
                progress.update(read)
        except KeyboardInterrupt:
            pass
        finally:
            consumer.close()
    end_ms = time.time() * 1000
    if fatal is not None:
        fail_with(fatal, bootstrap_server)
    if read < messages:
        click.echo(f"WARNING: Exiting before consuming the expected number of messages: timeout "
                   f"({timeout_ms} ms) exceeded. You can use the --timeout option to increase the "
                   f"timeout.")
    if not show_detailed_stats:
        click.echo(totals_line(start_ms, end_ms, read, read_bytes,
                               (join_ms[0] - start_ms) if join_ms else 0.0))


def _ms_text(ms: float) -> str:
    """Kafka's default date format, yyyy-MM-dd HH:mm:ss:SSS."""
    moment = datetime.fromtimestamp(ms / 1000)
    return moment.strftime("%Y-%m-%d %H:%M:%S:") + f"{moment.microsecond // 1000:03d}"


def totals_line(start_ms: float, end_ms: float, records: int, size: int, join_ms: float) -> str:
    """kafka-consumer-perf-test's result line (the CSV under its header)."""
    elapsed_s = max((end_ms - start_ms) / 1000, 1e-9)
    fetch_ms = max(end_ms - start_ms - join_ms, 1e-9)
    mb = size / MB
    return (f"{_ms_text(start_ms)}, {_ms_text(end_ms)}, {mb:.4f}, {mb / elapsed_s:.4f}, {records}, "
            f"{records / elapsed_s:.4f}, {int(join_ms)}, {int(fetch_ms)}, "
            f"{mb / (fetch_ms / 1000):.4f}, {records / (fetch_ms / 1000):.4f}")


def _detail_line(now_ms: float, last_ms: float, read: int, last_read: int, size: int,
                 last_size: int) -> str:
    elapsed_ms = max(now_ms - last_ms, 1e-9)
    mb = size / MB
    interval_mb = (size - last_size) / MB
    return (f"{_ms_text(now_ms)}, 0, {mb:.4f}, {1000 * interval_mb / elapsed_ms:.4f}, {read}, "
            f"{1000 * (read - last_read) / elapsed_ms:.4f}, 0, {int(elapsed_ms)}, "
            f"{1000 * interval_mb / elapsed_ms:.4f}, {1000 * (read - last_read) / elapsed_ms:.4f}")
