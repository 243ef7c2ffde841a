"""`logbroker produce` and `logbroker consume`: kafka-console-producer and kafka-console-consumer.

    printf 'k1:hello\\nk2:world\\n' | logbroker produce --topic t \\
        --property parse.key=true --property key.separator=:
    logbroker consume --topic t --from-beginning --max-messages 2 --property print.key=true

The producer reads one record per line of stdin, split by Kafka's LineMessageReader rules
(`parse.key`, `key.separator`, `parse.headers`, `headers.delimiter`, `headers.separator`,
`headers.key.separator`, `null.marker`, `ignore.error`). The consumer prints each record the way
Kafka's DefaultMessageFormatter does (`print.timestamp`, `print.partition`, `print.offset`,
`print.headers`, `print.key`, `print.value`, `key.separator`, `line.separator`,
`headers.separator`, `null.literal`), and `Processed a total of N messages` on stderr at the end.
"""

from __future__ import annotations

import random
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass

import click

from logbroker.admin_client import client_config, error_sentence, unreachable
from logbroker.cli.common import (
    bootstrap_option,
    ensure_reachable,
    fail,
    fail_with,
    load_properties_file,
    parse_key_values,
)

TIMESTAMP_TYPES = {0: "NO_TIMESTAMP", 1: "CreateTime", 2: "LogAppendTime"}


class LineFormatError(ValueError):
    """A stdin line that does not fit the reader's properties (Kafka's message for it)."""


def _flag(props: Mapping[str, str], key: str, default: bool) -> bool:
    return props[key].strip().lower() == "true" if key in props else default


@dataclass(frozen=True, slots=True)
class LineReader:
    """Kafka's LineMessageReader: `[headers<delimiter>][key<separator>]value` per line."""

    parse_key: bool = False
    key_separator: str = "\t"
    parse_headers: bool = False
    headers_delimiter: str = "\t"
    headers_separator: str = ","
    headers_key_separator: str = ":"
    ignore_error: bool = False
    null_marker: str | None = None

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> LineReader:
        reader = cls(parse_key=_flag(props, "parse.key", False),
                     key_separator=props.get("key.separator", "\t"),
                     parse_headers=_flag(props, "parse.headers", False),
                     headers_delimiter=props.get("headers.delimiter", "\t"),
                     headers_separator=props.get("headers.separator", ","),
                     headers_key_separator=props.get("headers.key.separator", ":"),
                     ignore_error=_flag(props, "ignore.error", False),
                     null_marker=props.get("null.marker"))
        reader._check()
        return reader

    def _check(self) -> None:
        pairs = [("headers.delimiter", self.headers_delimiter, "headers.separator", self.headers_separator),
                 ("headers.delimiter", self.headers_delimiter, "headers.key.separator", self.headers_key_separator),
                 ("headers.separator", self.headers_separator, "headers.key.separator", self.headers_key_separator),
                 ("null.marker", self.null_marker, "key.separator", self.key_separator),
                 ("null.marker", self.null_marker, "headers.separator", self.headers_separator),
                 ("null.marker", self.null_marker, "headers.delimiter", self.headers_delimiter),
                 ("null.marker", self.null_marker, "headers.key.separator", self.headers_key_separator)]
        for a, a_value, b, b_value in pairs:
            if a_value == b_value:
                raise click.BadParameter(f"{a} and {b} may not be equal", param_hint="--property")

    def parse(self, line: str, line_number: int
              ) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
        """One line (without its line break) → (key, value, headers). Raises LineFormatError."""
        headers_text = self._cut(self.parse_headers, line, 0, self.headers_delimiter,
                                 "headers delimiter", line_number)
        offset = 0 if headers_text is None else len(headers_text) + len(self.headers_delimiter)
        key = self._cut(self.parse_key, line, offset, self.key_separator, "key separator",
                        line_number)
        offset += 0 if key is None else len(key) + len(self.key_separator)
        value = line[offset:]
        headers = []
        if headers_text is not None and headers_text != self.null_marker:
            headers = self._split_headers(headers_text, line_number)
        return self._bytes(key), self._bytes(value), headers

    def _cut(self, enabled: bool, line: str, start: int, separator: str, name: str,
             line_number: int) -> str | None:
        if not enabled:
            return None
        index = line.find(separator, start)
        if index < 0:
            if self.ignore_error:
                return None
            raise LineFormatError(f"No {name} found on line number {line_number}: '{line}'")
        return line[start:index]

    def _split_headers(self, text: str, line_number: int) -> list[tuple[str, bytes | None]]:
        headers = []
        for pair in text.split(self.headers_separator):
            index = pair.find(self.headers_key_separator)
            if index < 0:
                if not self.ignore_error:
                    raise LineFormatError(f"No header key separator found in pair '{pair}' on "
                                          f"line number {line_number}")
                headers.append((pair, None))
                continue
            name, value = pair[:index], pair[index + len(self.headers_key_separator):]
            if name == self.null_marker:
                raise LineFormatError(f"Header keys should not be equal to the null marker "
                                      f"'{self.null_marker}' as they can't be null")
            headers.append((name, self._bytes(value)))
        return headers

    def _bytes(self, text: str | None) -> bytes | None:
        if text is None or text == self.null_marker:
            return None
        return text.encode("utf-8")


@dataclass(frozen=True, slots=True)
class RecordFormatter:
    """Kafka's DefaultMessageFormatter, writing bytes."""

    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> RecordFormatter:
        def text(key: str, default: bytes) -> bytes:
            return props[key].encode("utf-8") if key in props else default
        return cls(print_timestamp=_flag(props, "print.timestamp", False),
                   print_partition=_flag(props, "print.partition", False),
                   print_offset=_flag(props, "print.offset", False),
                   print_headers=_flag(props, "print.headers", False),
                   print_key=_flag(props, "print.key", False),
                   print_value=_flag(props, "print.value", True),
                   key_separator=text("key.separator", b"\t"),
                   line_separator=text("line.separator", b"\n"),
                   headers_separator=text("headers.separator", b","),
                   null_literal=text("null.literal", b"null"))

    def format(self, *, timestamp_type: int, timestamp: int, partition: int, offset: int,
               headers: list[tuple[str, bytes | None]] | None, key: bytes | None,
               value: bytes | None) -> bytes:
        fields: list[bytes] = []
        if self.print_timestamp:
            name = TIMESTAMP_TYPES.get(timestamp_type, "NO_TIMESTAMP")
            fields.append(b"NO_TIMESTAMP" if name == "NO_TIMESTAMP"
                          else f"{name}:{timestamp}".encode())
        if self.print_partition:
            fields.append(f"Partition:{partition}".encode())
        if self.print_offset:
            fields.append(f"Offset:{offset}".encode())
        if self.print_headers:
            if not headers:
                fields.append(b"NO_HEADERS")
            else:
                fields.append(self.headers_separator.join(
                    name.encode("utf-8") + b":" + (self.null_literal if v is None else v)
                    for name, v in headers))
        if self.print_key:
            fields.append(self.null_literal if key is None else key)
        if self.print_value:
            fields.append(self.null_literal if value is None else value)
        # Fields are joined by key.separator; whichever is printed last ends the line.
        return self.key_separator.join(fields) + self.line_separator if fields else b""


# ---- produce -------------------------------------------------------------------------------

ACKS = {"-1": "all", "all": "all", "0": "0", "1": "1"}
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@bootstrap_option
@click.option("--topic", required=True, help="The topic to produce to.")
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE",
              help="A line reader property: parse.key, key.separator, parse.headers, "
                   "headers.delimiter, headers.separator, headers.key.separator, null.marker, "
                   "ignore.error. Repeatable.")
@click.option("--compression-codec", is_flag=False, flag_value="gzip", default="none",
              type=click.Choice(CODECS), help="Compression codec (gzip if given without a value).")
@click.option("--request-required-acks", default="-1", show_default=True,
              type=click.Choice(list(ACKS)), help="The acks of produce requests.")
@click.option("--sync", is_flag=True, help="Wait for each record to be acknowledged.")
@click.option("--batch-size", type=int, default=16384, show_default=True, help="batch.size.")
@click.option("--timeout", "linger_ms", type=int, default=1000, show_default=True,
              help="linger.ms: how long a batch waits for more records.")
@click.option("--request-timeout-ms", type=int, default=1500, show_default=True,
              help="request.timeout.ms of produce requests.")
@click.option("--message-send-max-retries", type=int, default=3, show_default=True,
              help="retries.")
@click.option("--retry-backoff-ms", type=int, default=100, show_default=True,
              help="retry.backoff.ms.")
@click.option("--producer-property", "producer_properties", multiple=True, metavar="KEY=VALUE",
              help="A producer config (librdkafka or Java name). Repeatable.")
@click.option("--producer.config", "producer_config", type=click.Path(dir_okay=False),
              help="A properties file of producer configs (--producer-property wins).")
def produce(bootstrap_server: str, topic: str, properties: tuple[str, ...],
            compression_codec: str, request_required_acks: str, sync: bool, batch_size: int,
            linger_ms: int, request_timeout_ms: int, message_send_max_retries: int,
            retry_backoff_ms: int, producer_properties: tuple[str, ...],
            producer_config: str | None) -> None:
    """Send each line of stdin as a record (kafka-console-producer.sh)."""
    from confluent_kafka import KafkaException, Producer

    reader = LineReader.from_properties(parse_key_values(properties, "--property"))
    tool_defaults = {"acks": ACKS[request_required_acks], "compression.type": compression_codec,
                     "batch.size": str(batch_size), "linger.ms": str(linger_ms),
                     "request.timeout.ms": str(request_timeout_ms),
                     "retries": str(message_send_max_retries),
                     "retry.backoff.ms": str(retry_backoff_ms), "message.timeout.ms": "60000",
                     "client.id": "console-producer"}
    config = client_config(bootstrap_server, tool_defaults,
                           load_properties_file(producer_config, "--producer.config"),
                           parse_key_values(producer_properties, "--producer-property"))
    try:
        producer = Producer(config)
    except (KafkaException, ValueError) as e:
        fail(f"Invalid producer config: {error_sentence(e)}")
    ensure_reachable(producer, config)

    failures: list[object] = []

    def delivered(err, _msg) -> None:
        if err is not None:
            failures.append(err)
            if len(failures) == 1:
                click.echo(f"Error when sending a record to topic {topic}: {error_sentence(err)}",
                           err=True)

    prompt = sys.stdin.isatty()
    line_number = 0
    try:
        while True:
            if prompt:
                click.echo(">", nl=False)
            raw = sys.stdin.buffer.readline()
            if not raw:
                break
            line_number += 1
            line = raw.decode("utf-8", errors="replace").removesuffix("\n").removesuffix("\r")
            try:
                key, value, headers = reader.parse(line, line_number)
            except LineFormatError as e:
                producer.flush(30)
                fail(str(e))
            _send(producer, topic, key, value, headers, delivered)
            if sync:
                producer.flush()
            else:
                producer.poll(0)
    except KeyboardInterrupt:
        pass
    remaining = producer.flush(60)
    if remaining:
        fail(f"{remaining} record(s) were not delivered to topic {topic} in time"
             + (f": {error_sentence(failures[0])}" if failures else "."))
    if failures:
        if unreachable(failures[0], bootstrap_server):
            fail_with(failures[0], bootstrap_server)
        fail(f"{len(failures)} record(s) could not be sent to topic {topic}: "
             f"{error_sentence(failures[0])}")


def _send(producer, topic, key, value, headers, callback) -> None:
    while True:
        try:
            producer.produce(topic, value=value, key=key, headers=headers or None,
                             on_delivery=callback)
            return
        except BufferError:  # the local queue is full: let deliveries drain it
            producer.poll(0.1)


# ---- consume -------------------------------------------------------------------------------

@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@bootstrap_option
@click.option("--topic", help="The topic to consume.")
@click.option("--include", help="A regular expression of topics to consume (instead of --topic).")
@click.option("--group", help="Consumer group id (default: a fresh console-consumer-N, "
                              "without committing offsets).")
@click.option("--from-beginning", is_flag=True,
              help="Start at the earliest offset when there is no committed offset.")
@click.option("--partition", type=int, help="Consume only this partition (no group).")
@click.option("--offset", help="With --partition: earliest, latest, or an offset.")
@click.option("--max-messages", type=int, help="Exit after this many records.")
@click.option("--timeout-ms", type=int,
              help="Exit when no record arrives for this many milliseconds.")
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE",
              help="A formatter property: print.key, print.value, print.timestamp, print.offset, "
                   "print.partition, print.headers, key.separator, line.separator, "
                   "headers.separator, null.literal. Repeatable.")
@click.option("--isolation-level", type=click.Choice(["read_committed", "read_uncommitted"]),
              help="isolation.level.")
@click.option("--consumer-property", "consumer_properties", multiple=True, metavar="KEY=VALUE",
              help="A consumer config (librdkafka or Java name). Repeatable.")
@click.option("--consumer.config", "consumer_config", type=click.Path(dir_okay=False),
              help="A properties file of consumer configs (--consumer-property wins).")
def consume(bootstrap_server: str, topic: str | None, include: str | None, group: str | None,
            from_beginning: bool, partition: int | None, offset: str | None,
            max_messages: int | None, timeout_ms: int | None, properties: tuple[str, ...],
            isolation_level: str | None, consumer_properties: tuple[str, ...],
            consumer_config: str | None) -> None:
    """Print records to stdout (kafka-console-consumer.sh)."""
    from confluent_kafka import Consumer, KafkaException

    if (topic is None) == (include is None):
        raise click.UsageError("Exactly one of --topic and --include is required.")
    if partition is not None and topic is None:
        raise click.UsageError("The topic is required when partition is specified.")
    if offset is not None and partition is None:
        raise click.UsageError("The partition is required when offset is specified.")
    if offset is not None and from_beginning:
        raise click.UsageError("Options from-beginning and offset cannot be specified together.")
    start_offset = _start_offset(offset, from_beginning)
    formatter = RecordFormatter.from_properties(parse_key_values(properties, "--property"))
    extra = {**load_properties_file(consumer_config, "--consumer.config"),
             **parse_key_values(consumer_properties, "--consumer-property")}
    groups = {g for g in (group, extra.get("group.id")) if g is not None}
    if len(groups) > 1:
        raise click.UsageError("The group ids given with --group and group.id do not match.")
    if groups and partition is not None:
        raise click.UsageError("Options group and partition cannot be specified together.")
    reset = extra.get("auto.offset.reset")
    if from_beginning and reset not in (None, "earliest", "smallest", "beginning"):
        fail(f"Can't simultaneously specify --from-beginning and 'auto.offset.reset={reset}', "
             f"please remove one option")
    tool_defaults = {"auto.offset.reset": "earliest" if from_beginning else "latest",
                     "client.id": "console-consumer"}
    if group is not None:
        tool_defaults["group.id"] = group
    elif not groups:
        tool_defaults["group.id"] = f"console-consumer-{random.randrange(100_000)}"
        tool_defaults["enable.auto.commit"] = "false"
    if isolation_level:
        tool_defaults["isolation.level"] = isolation_level
    config = client_config(bootstrap_server, tool_defaults, extra)
    try:
        consumer = Consumer(config)
    except (KafkaException, ValueError) as e:
        fail(f"Invalid consumer config: {error_sentence(e)}")
    ensure_reachable(consumer, config)

    if partition is not None:
        from confluent_kafka import TopicPartition
        consumer.assign([TopicPartition(topic, partition, start_offset)])
    else:
        consumer.subscribe([topic] if topic is not None else ["^" + include])

    count = 0
    out = sys.stdout.buffer
    warned: set[int] = set()
    stop = []
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    deadline = None if timeout_ms is None or timeout_ms < 0 else time.monotonic() + timeout_ms / 1000
    exit_code = 0
    try:
        while not stop and (max_messages is None or count < max_messages):
            wait_s = 0.5 if deadline is None else min(0.5, max(0.0, deadline - time.monotonic()))
            message = consumer.poll(wait_s)
            if message is None:
                if deadline is not None and time.monotonic() >= deadline:
                    break
                continue
            error = message.error()
            if error is not None:
                if error.fatal():
                    click.echo(f"Error: {error_sentence(error)}", err=True)
                    exit_code = 1
                    break
                if error.code() not in warned:  # retriable: say it once, keep waiting
                    warned.add(error.code())
                    click.echo(f"WARNING: {error_sentence(error)}", err=True)
                continue
            if deadline is not None:
                deadline = time.monotonic() + timeout_ms / 1000
            timestamp_type, timestamp = message.timestamp()
            out.write(formatter.format(
                timestamp_type=timestamp_type, timestamp=timestamp,
                partition=message.partition(), offset=message.offset(),
                headers=message.headers(), key=message.key(), value=message.value()))
            out.flush()
            count += 1
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:
        exit_code = 1
    finally:
        signal.signal(signal.SIGTERM, previous)
        consumer.close()
    click.echo(f"Processed a total of {count} messages", err=True)
    sys.exit(exit_code)


def _start_offset(offset: str | None, from_beginning: bool) -> int:
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END

    if offset is None:
        return OFFSET_BEGINNING if from_beginning else OFFSET_END
    if offset.lower() == "earliest":
        return OFFSET_BEGINNING
    if offset.lower() == "latest":
        return OFFSET_END
    if offset.isdigit():
        return int(offset)
    raise click.BadParameter(f"The provided offset value '{offset}' is incorrect. Valid values "
                             f"are 'earliest', 'latest', or a non-negative long.",
                             param_hint="--offset")
