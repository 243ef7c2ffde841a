"""The reference pipeline, end to end: `python -m logbroker.pipeline`.

1. start an embedded broker (a `logbroker serve` subprocess on a free port, data in a temp dir),
   or use `--bootstrap` to point at a running cluster;
2. produce a seeded clickstream (`events`) to a 3-partition topic, then one end-of-stream marker
   per partition;
3. run the Structured Streaming job (`job`) under trigger(availableNow=True): parse, watermark,
   1-minute windows, results to a result topic and to Parquet;
4. check the Parquet rows and the result topic against a plain Python recount, print a summary and
   save a PNG chart.

Everything it starts (broker, SparkSession) it stops, also on errors and Ctrl-C. Output goes to
`--output` (default ./pipeline-output), whose checkpoint and results are replaced on each run, so a
second run starts clean.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from logbroker.pipeline.events import ClickEvent, end_of_stream_marker, generate_events
from logbroker.pipeline.job import JobConfig
from logbroker.pipeline.results import (Check, WindowCounts, compare, parse_result_records,
                                        read_parquet_windows, recount, save_chart)

SOURCE_PARTITIONS = 3


@dataclass(frozen=True, kw_only=True)
class PipelineOptions:
    events: int = 20_000
    seed: int = 7
    output_dir: Path = Path("pipeline-output")
    bootstrap: str | None = None  # None: start an embedded broker
    master: str = "local[2]"
    max_offsets_per_trigger: int = 5_000
    schema_registry: str | None = None  # the embedded broker's schema.registry.listeners, if any


@dataclass(kw_only=True)
class PipelineResult:
    events: list[ClickEvent]
    expected: WindowCounts
    found: WindowCounts
    checks: list[Check]
    micro_batches: int = 0
    input_rows: int = 0
    timings_s: dict[str, float] = field(default_factory=dict)
    chart: Path | None = None
    topics: tuple[str, str] = ("", "")

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)


def _topics(options: PipelineOptions) -> tuple[str, str]:
    if options.bootstrap is None:
        return "clickstream", "clickstream-windows"
    # A shared cluster keeps earlier runs' records: give each run its own topics.
    run = uuid.uuid4().hex[:8]
    return f"clickstream-{run}", f"clickstream-windows-{run}"


def create_topics(bootstrap: str, source: str, result: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(source, SOURCE_PARTITIONS, 1), NewTopic(result, 1, 1)])
    for future in futures.values():
        future.result(30)


def produce_events(bootstrap: str, topic: str, events: list[ClickEvent], progress=None,
                   task=None) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 10})
    failures: list[str] = []

    def on_delivery(error, _message) -> None:
        if error is not None:
            failures.append(str(error))

    for i, event in enumerate(events):
        while True:
            try:
                producer.produce(topic, key=event.user_id.encode(), value=event.to_json(),
                                 on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 999:
            producer.poll(0)
            if progress is not None:
                progress.update(task, completed=i + 1)
    # The end of the stream, marked in every partition (see events.end_of_stream_marker).
    marker = end_of_stream_marker(events, event_id=len(events), past_s=600)
    for partition in range(SOURCE_PARTITIONS):
        producer.produce(topic, key=b"-", value=marker.to_json(), partition=partition,
                         on_delivery=on_delivery)
    if producer.flush(60) or failures:
        raise RuntimeError(f"producing the feed failed: {failures[:3]}")
    if progress is not None:
        progress.update(task, completed=len(events))


def produce_records(bootstrap: str, topic: str,
                    records: list[tuple[bytes, bytes, int]]) -> None:
    """Produce (key, value, partition) records and wait until all are acknowledged."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True})
    failures: list[str] = []
    for key, value, partition in records:
        producer.produce(topic, key=key, value=value, partition=partition,
                         on_delivery=lambda error, _m: error and failures.append(str(error)))
    if producer.flush(60) or failures:
        raise RuntimeError(f"producing to {topic} failed: {failures[:3]}")


def read_topic_values(bootstrap: str, topic: str, partitions: int = 1) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values, at_end = [], set()
    deadline = time.monotonic() + 60
    while len(at_end) < partitions and time.monotonic() < deadline:
        for message in consumer.consume(1000, 0.2):
            if message.error():
                at_end.add(message.partition())
            else:
                values.append(message.value())
    consumer.close()
    return values


LOG4J2_PROPERTIES = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def quiet_spark_logs(conf_dir: Path) -> None:
    """Spark's JVM logs only errors: a log4j2.properties in SPARK_CONF_DIR, which the JVM reads
    at launch (before any SparkSession config could apply). Kept if SPARK_CONF_DIR is set."""
    if "SPARK_CONF_DIR" in os.environ:
        return
    conf_dir.mkdir(parents=True, exist_ok=True)
    (conf_dir / "log4j2.properties").write_text(LOG4J2_PROPERTIES)
    os.environ["SPARK_CONF_DIR"] = str(conf_dir)


class SetupError(RuntimeError):
    """Something the pipeline needs is not installed; the message says what to install."""


def check_spark_installed() -> None:
    if importlib.util.find_spec("pyspark") is None:
        raise SetupError("PySpark is not installed: pip install -e '.[spark]'")
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        raise SetupError("Spark needs Java 17: apt-get install openjdk-17-jre-headless "
                         "(or set JAVA_HOME)")


def spark_session(master: str):
    """A SparkSession whose Python workers use this interpreter, with the data source registered."""
    if master.startswith("local"):
        # Local workers run on this machine: give them this interpreter (it has logbroker).
        # On a cluster the executors' Python is configured there (docs/spark.md).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from logbroker.spark import LogbrokerDataSource

    spark = (SparkSession.builder.master(master).appName("logbroker-clickstream")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(LogbrokerDataSource)
    return spark


def _run_available_now(spark, config: JobConfig, seen: dict[int, int], total_rows: int,
                       progress=None, task=None) -> None:
    from logbroker.pipeline import job

    query = job.start(spark, config)
    try:
        while query.isActive:
            for update in query.recentProgress:
                seen[update["batchId"]] = update["numInputRows"]
            if progress is not None:
                progress.update(task, completed=min(sum(seen.values()), total_rows),
                                description=f"Streaming job: micro-batch {max(seen, default=0)}")
            query.awaitTermination(0.5)
        if query.exception() is not None:
            raise RuntimeError(f"the streaming query failed: {query.exception()}")
    finally:
        if query.isActive:
            query.stop()
    for update in query.recentProgress:
        seen[update["batchId"]] = update["numInputRows"]


def run_stream_job(spark, config: JobConfig, total_rows: int, progress=None,
                   task=None) -> tuple[int, int]:
    """Run the job to the end of the stream; returns (micro-batches, input rows).

    The end-of-stream markers are in the last batch with data; they move the watermark past every
    window, and Spark then runs one more, no-data, micro-batch before the availableNow query stops
    — that batch emits the last windows.
    """
    seen: dict[int, int] = {}
    _run_available_now(spark, config, seen, total_rows, progress, task)
    if progress is not None:
        progress.update(task, completed=total_rows)
    return len(seen), sum(seen.values())


def run_pipeline(options: PipelineOptions, *, spark=None, console: Console | None = None
                 ) -> PipelineResult:
    """Run the whole pipeline; `spark`, if given, is used and left running."""
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = console or Console(stderr=True)
    if spark is None:
        check_spark_installed()
    output_dir = options.output_dir
    for stale in ("checkpoint", "windows"):
        shutil.rmtree(output_dir / stale, ignore_errors=True)
    output_dir.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    started = time.monotonic()
    source_topic, result_topic = _topics(options)

    with ExitStack() as stack:
        progress = stack.enter_context(Progress(
            SpinnerColumn(), TextColumn("{task.description:<42}"), BarColumn(),
            TextColumn("{task.completed:>7,}/{task.total:<7,}"), TimeElapsedColumn(),
            console=console, transient=False))
        step = progress.add_task("Starting the embedded broker", total=1)
        if options.bootstrap is None:
            from logbroker.testing import BrokerProcess

            broker_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(
                prefix="logbroker-pipeline-")))
            registry = {"schema.registry.listeners": options.schema_registry} if options.schema_registry else {}
            broker = BrokerProcess(broker_dir, overrides=registry)
            stack.callback(broker.kill)  # after a clean stop(), kill() does nothing
            broker.start()
            stack.callback(broker.stop)
            bootstrap = broker.bootstrap
            if options.schema_registry:
                console.print(f"Schema registry at {broker.schema_registry_url()}")
        else:
            bootstrap = options.bootstrap
        progress.update(step, completed=1, description=f"Broker at {bootstrap}")
        create_topics(bootstrap, source_topic, result_topic)

        events = generate_events(options.events, seed=options.seed)
        step = progress.add_task(f"Producing the clickstream to '{source_topic}'",
                                 total=len(events))
        t = time.monotonic()
        produce_events(bootstrap, source_topic, events, progress, step)
        timings["produce"] = time.monotonic() - t

        step = progress.add_task("Starting Spark (takes 10-20 s)", total=1)
        t = time.monotonic()
        if spark is None:
            quiet_spark_logs(broker_dir / "spark-conf" if options.bootstrap is None
                             else Path(stack.enter_context(tempfile.TemporaryDirectory())))
            spark = spark_session(options.master)
            stack.callback(spark.stop)
        progress.update(step, completed=1, description=f"Spark {spark.version} on {options.master}")
        timings["spark_start"] = time.monotonic() - t

        config = JobConfig(bootstrap_servers=bootstrap, source_topic=source_topic,
                           result_topic=result_topic, output_dir=output_dir,
                           max_offsets_per_trigger=options.max_offsets_per_trigger)
        total_rows = len(events) + SOURCE_PARTITIONS  # the feed and the markers
        step = progress.add_task("Streaming job", total=total_rows)
        t = time.monotonic()
        batches, rows = run_stream_job(spark, config, total_rows, progress, step)
        timings["stream_job"] = time.monotonic() - t

        step = progress.add_task("Checking against a plain Python recount", total=1)
        expected = recount(events)
        found, parquet_rows = read_parquet_windows(output_dir / "windows")
        topic_found, topic_rows = parse_result_records(read_topic_values(bootstrap, result_topic))
        checks = [compare("Parquet", expected, found, parquet_rows),
                  compare("result topic", expected, topic_found, topic_rows)]
        chart = save_chart(found, output_dir / "clickstream.png",
                           title=f"Clickstream: {len(events):,} events, seed {options.seed}")
        progress.update(step, completed=1)
    timings["total"] = time.monotonic() - started
    return PipelineResult(events=events, expected=expected, found=found, checks=checks,
                          micro_batches=batches, input_rows=rows, timings_s=timings, chart=chart,
                          topics=(source_topic, result_topic))


def print_summary(result: PipelineResult, console: Console) -> None:
    from rich.panel import Panel
    from rich.table import Table

    by_type: dict[str, list[int]] = {}
    for (_, event_type), (n, revenue) in result.found.items():
        cell = by_type.setdefault(event_type, [0, 0, 0])
        cell[0] += 1
        cell[1] += n
        cell[2] += revenue
    totals = Table(title="Per event type (from the job's results)")
    for name, justify in (("event type", "left"), ("windows", "right"), ("events", "right"),
                          ("revenue", "right")):
        totals.add_column(name, justify=justify)
    for event_type in sorted(by_type):
        windows, n, revenue = by_type[event_type]
        totals.add_row(event_type, f"{windows:,}", f"{n:,}",
                       f"${revenue / 100:,.2f}" if revenue else "-")

    busiest = Table(title="Busiest minutes")
    for name in ("window (UTC)", "views", "carts", "purchases", "revenue"):
        busiest.add_column(name, justify="right" if name != "window (UTC)" else "left")
    minutes = {start for start, _ in result.found}
    ranked = sorted(minutes, key=lambda m: -sum(result.found.get((m, t), (0, 0))[0]
                                                for t in ("view", "add_to_cart", "purchase")))
    for m in ranked[:5]:
        cells = [result.found.get((m, t), (0, 0)) for t in ("view", "add_to_cart", "purchase")]
        busiest.add_row(m.strftime("%H:%M"), *(f"{c[0]:,}" for c in cells),
                        f"${cells[2][1] / 100:,.2f}")

    checks = Table(title=f"Checked against a plain Python recount ({len(result.expected)} windows)")
    for name in ("results in", "rows", "missing", "unexpected", "different", "duplicates", ""):
        checks.add_column(name, justify="right" if name not in ("results in", "") else "left")
    for check in result.checks:
        checks.add_row(check.name, str(check.rows), str(len(check.missing)),
                       str(len(check.unexpected)), str(len(check.different)),
                       str(check.duplicates),
                       "[green]✓ equal[/]" if check.ok else "[red]✗ differs[/]")

    t = result.timings_s
    console.print(Panel.fit(
        f"{len(result.events):,} events in '{result.topics[0]}' → {result.micro_batches} "
        f"micro-batches, {result.input_rows:,} rows read by Spark → "
        f"{len(result.found)} windows in Parquet and '{result.topics[1]}'\n"
        f"produce {t.get('produce', 0):.1f} s · Spark start {t.get('spark_start', 0):.1f} s · "
        f"streaming job {t.get('stream_job', 0):.1f} s · total {t.get('total', 0):.1f} s\n"
        f"chart: {result.chart}", title="logbroker reference pipeline"))
    console.print(totals)
    console.print(busiest)
    console.print(checks)
    for check in result.checks:
        if not check.ok:
            console.print(f"[red]{check.name}: missing {check.missing[:5]}, unexpected "
                          f"{check.unexpected[:5]}, different {check.different[:5]}[/]")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m logbroker.pipeline",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=PipelineOptions.events,
                        help="clickstream events to generate (default %(default)s)")
    parser.add_argument("--seed", type=int, default=PipelineOptions.seed,
                        help="generator seed: the same seed gives the same feed")
    parser.add_argument("--output", type=Path, default=PipelineOptions.output_dir,
                        help="checkpoint, Parquet results and chart (default %(default)s)")
    parser.add_argument("--bootstrap", help="use this Kafka/logbroker cluster instead of "
                                            "starting an embedded broker")
    parser.add_argument("--master", default=PipelineOptions.master,
                        help="Spark master (local[2], spark://host:7077, yarn, k8s://...)")
    parser.add_argument("--max-offsets-per-trigger", type=int,
                        default=PipelineOptions.max_offsets_per_trigger,
                        help="records per micro-batch (default %(default)s)")
    parser.add_argument("--schema-registry", nargs="?", const="http://127.0.0.1:8081", metavar="URL",
                        help="the embedded broker also serves the schema registry, on URL "
                             "(default %(const)s)")
    args = parser.parse_args(argv)
    console = Console()
    options = PipelineOptions(events=args.events, seed=args.seed, output_dir=args.output,
                              bootstrap=args.bootstrap, master=args.master,
                              max_offsets_per_trigger=args.max_offsets_per_trigger,
                              schema_registry=args.schema_registry)
    try:
        result = run_pipeline(options, console=console)
    except SetupError as e:
        console.print(f"[red]{e}[/]")
        return 2
    except KeyboardInterrupt:
        console.print("[yellow]interrupted; everything started was stopped[/]")
        return 130
    print_summary(result, console)
    return 0 if result.ok else 1
