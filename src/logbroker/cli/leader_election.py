"""`logbroker leader-election`: kafka-leader-election.sh — elect preferred or unclean leaders.

    logbroker leader-election --bootstrap-server HOST:PORT --election-type PREFERRED --all-topic-partitions
    Successfully completed leader election (PREFERRED) for partitions t-0, t-2
    Valid replica already elected for partitions t-1

The partitions are one (`--topic T --partition P`), all (`--all-topic-partitions`), or those of a
JSON file (`--path-to-json-file F`: {"partitions": [{"topic": "t", "partition": 0}, …]}). The
request goes to the controller (confluent-kafka's elect_leaders). A partition that could not be
elected prints an `Error completing leader election …` line, and the tool exits with 1.
"""

from __future__ import annotations

import json

import click

from logbroker.admin_client import error_sentence
from logbroker.cli.common import admin_client, fail, fail_with

TIMEOUT_S = 30.0


@click.command("leader-election")
@click.option("--bootstrap-server", "bootstrap_server", required=True, metavar="HOST:PORT[,…]",
              help="The broker(s) to connect to.")
@click.option("--admin.config", "admin_config", metavar="FILE",
              help="Admin client properties file.")
@click.option("--election-type", "election_type", required=True,
              type=click.Choice(["PREFERRED", "UNCLEAN"], case_sensitive=False),
              help="PREFERRED: the first replica of each assignment; UNCLEAN: any live replica "
                   "for partitions without a live leader.")
@click.option("--topic", help="The topic of the partition to elect a leader for (with --partition).")
@click.option("--partition", type=int, help="The partition to elect a leader for (with --topic).")
@click.option("--all-topic-partitions", "all_partitions", is_flag=True,
              help="Elect leaders for every partition that needs an election.")
@click.option("--path-to-json-file", "json_file", type=click.Path(dir_okay=False),
              help='A JSON file: {"partitions": [{"topic": "t", "partition": 0}, …]}.')
def leader_election(bootstrap_server: str, admin_config: str | None, election_type: str,
                    topic: str | None, partition: int | None, all_partitions: bool,
                    json_file: str | None) -> None:
    """Elect partition leaders, as kafka-leader-election.sh."""
    from confluent_kafka import ElectionType, TopicPartition

    chosen = [name for name, given in (("--topic", topic is not None),
                                       ("--all-topic-partitions", all_partitions),
                                       ("--path-to-json-file", json_file is not None)) if given]
    if len(chosen) != 1:
        fail("Exactly one of --topic, --all-topic-partitions and --path-to-json-file must be given.")
    if (topic is None) != (partition is None):
        fail("--topic and --partition must be given together.")
    election_type = election_type.upper()
    if all_partitions:
        partitions = None
    elif json_file is not None:
        partitions = [TopicPartition(t, p) for t, p in _partitions_from_json(json_file)]
    else:
        partitions = [TopicPartition(topic, partition)]
    admin = admin_client(bootstrap_server, admin_config)
    try:
        results = admin.elect_leaders(ElectionType[election_type], partitions).result(TIMEOUT_S)
    except Exception as e:  # noqa: BLE001 - librdkafka's errors, reported as one sentence
        fail_with(e, bootstrap_server, what="Leader election failed")
    _report(election_type, {f"{tp.topic}-{tp.partition}": error for tp, error in results.items()})


def _partitions_from_json(path: str) -> list[tuple[str, int]]:
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
        entries = [(str(p["topic"]), int(p["partition"])) for p in value["partitions"]]
    except OSError as e:
        fail(f"Cannot read {path}: {e.strerror or e}.")
    except (ValueError, KeyError, TypeError) as e:
        fail(f"{path} is not a partition list like {{\"partitions\": [{{\"topic\": \"t\", "
             f"\"partition\": 0}}]}} ({e!r}).")
    duplicates = sorted({f"{t}-{p}" for t, p in entries if entries.count((t, p)) > 1})
    if duplicates:
        fail(f"Replica election data contains duplicate partitions: {', '.join(duplicates)}.")
    return entries


def _report(election_type: str, results: dict[str, object]) -> None:
    """Print Kafka's three kinds of lines; exit 1 when some partition failed."""
    from confluent_kafka import KafkaError

    succeeded = [tp for tp, error in results.items() if error is None]
    noop = [tp for tp, error in results.items() if isinstance(error, KafkaError)
            and error.code() == KafkaError.ELECTION_NOT_NEEDED]
    failed = {tp: error for tp, error in results.items() if error is not None and tp not in noop}
    if succeeded:
        click.echo(f"Successfully completed leader election ({election_type}) for partitions "
                   f"{', '.join(succeeded)}")
    if noop:
        click.echo(f"Valid replica already elected for partitions {', '.join(noop)}")
    for tp, error in failed.items():
        click.echo(f"Error completing leader election ({election_type}) for partition: {tp}: "
                   f"{error_sentence(error)}")
    if failed:
        fail(f"{len(failed)} replica(s) could not be elected")
