"""`logbroker log-dirs`: kafka-log-dirs.sh — what each broker's log dirs hold.

    logbroker log-dirs --describe [--broker-list 0,1] [--topic-list t1,t2]
    Querying brokers for log directories information
    Received log directory information from brokers 0
    {"brokers":[{"broker":0,"logDirs":[{"partitions":[{"partition":"t1-0","size":1234,
    "offsetLag":0,"isFuture":false}],"error":null,"logDir":"/var/lib/logbroker"}]}],"version":1}

The JSON is Kafka's (`error` is the Java exception's class name, or null); each broker is asked
with DescribeLogDirs over its own connection, every partition, and the topic list filters the
answer, as Kafka's tool does.
"""

from __future__ import annotations

import json

import click

from logbroker.cli.admin_connections import AdminConnections, client_security, run_admin
from logbroker.cli.common import bootstrap_option, fail, load_properties_file
from logbroker.errors import KafkaError
from logbroker.log_dir_usage import broker_addresses, describe_log_dirs

# The Java exception a DescribeLogDirs error code stands for, as Kafka's tool prints it.
ERROR_CLASSES = {56: "org.apache.kafka.common.errors.KafkaStorageException",
                 31: "org.apache.kafka.common.errors.ClusterAuthorizationException"}


class LogDirsAdmin(AdminConnections):
    def __init__(self, bootstrap: str, security=None) -> None:
        super().__init__(bootstrap, security, client_id="logbroker-log-dirs")

    async def find_brokers(self) -> None:
        self.brokers = await broker_addresses(self._bootstrap)

    async def describe(self, broker_id: int) -> list:
        try:
            return await describe_log_dirs(self.connection(broker_id))
        except KafkaError as e:
            raise click.ClickException(f"broker {broker_id}: {e}") from None


def as_kafka_json(answers: dict[int, list], topics: set[str]) -> dict:
    """kafka-log-dirs.sh's JSON document of the brokers' DescribeLogDirs results."""
    return {"brokers": [{"broker": broker, "logDirs": [
        {"partitions": [{"partition": f"{t.name}-{p.partition_index}", "size": p.partition_size,
                         "offsetLag": p.offset_lag, "isFuture": p.is_future_key}
                        for t in d.topics if not topics or t.name in topics for p in t.partitions],
         "error": ERROR_CLASSES.get(int(d.error_code), str(int(d.error_code))) if int(d.error_code) else None,
         "logDir": d.log_dir}
        for d in results]} for broker, results in sorted(answers.items())], "version": 1}


def _int_list(text: str | None, option: str) -> list[int] | None:
    if not text:
        return None
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a comma-separated list of broker ids",
                                 param_hint=option) from None


@click.command("log-dirs", context_settings={"help_option_names": ["-h", "--help"]})
@bootstrap_option
@click.option("--command-config", type=click.Path(dir_okay=False),
              help="A properties file of admin client configs.")
@click.option("--describe", is_flag=True, help="Describe the specified log directories on the specified brokers.")
@click.option("--broker-list", help="Comma-separated broker ids to query (default: every broker).")
@click.option("--topic-list", help="Comma-separated topics to show (default: every topic).")
def log_dirs(bootstrap_server: str, command_config: str | None, describe: bool,
             broker_list: str | None, topic_list: str | None) -> None:
    """Query the log directories of brokers (kafka-log-dirs.sh)."""
    if not describe:
        fail("Command must include exactly one action: --describe")
    wanted = _int_list(broker_list, "--broker-list")
    topics = {t.strip() for t in (topic_list or "").split(",") if t.strip()}
    security = client_security(load_properties_file(command_config, "--command-config")) if command_config else None

    async def work(admin: LogDirsAdmin) -> dict[int, list]:
        await admin.find_brokers()
        brokers = sorted(admin.brokers) if wanted is None else wanted
        missing = [b for b in brokers if b not in admin.brokers]
        if missing:
            fail(f"The given brokers do not exist from --broker-list: "
                 f"{','.join(map(str, missing))}. Current existent brokers: "
                 f"{','.join(map(str, sorted(admin.brokers)))}")
        click.echo("Querying brokers for log directories information")
        return {b: await admin.describe(b) for b in brokers}

    answers = run_admin(bootstrap_server, lambda: LogDirsAdmin(bootstrap_server, security), work)
    click.echo(f"Received log directory information from brokers {','.join(map(str, sorted(answers)))}")
    click.echo(json.dumps(as_kafka_json(answers, topics), separators=(",", ":")))
