"""`logbroker reassign-partitions`: kafka-reassign-partitions.sh — move partitions between brokers.

    logbroker reassign-partitions --bootstrap-server H:P --topics-to-move-json-file topics.json \\
        --broker-list 2,3 --generate
    logbroker reassign-partitions --bootstrap-server H:P --reassignment-json-file plan.json --execute
    logbroker reassign-partitions --bootstrap-server H:P --reassignment-json-file plan.json --verify

The files and the output are Kafka's: a plan is {"version":1,"partitions":[{"topic":"t",
"partition":0,"replicas":[2,3],"log_dirs":["any","any"]}]}, a topics file {"version":1,
"topics":[{"topic":"t"}]}. Metadata comes through confluent-kafka; AlterPartitionReassignments and
ListPartitionReassignments, which librdkafka does not offer, go to the controller named in
Metadata over logbroker's own client. logbroker has no replication throttles, so there is no
--throttle, and the throttles --verify and --cancel "clear" are only reported, as Kafka does.
Log-directory moves (log_dirs other than "any") are not supported.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter

import click

from logbroker.cli.common import admin_client, fail, fail_with

TIMEOUT_S = 30.0
ANY_LOG_DIR = "any"
CANNOT_EXECUTE_BECAUSE_OF_EXISTING = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to "
    "override this and create a new partition assignment in addition to the existing one. The "
    "--additional flag can also be used to change the throttle by resubmitting the current "
    "reassignment.")
ACTIONS = ("generate", "execute", "verify", "cancel", "list")

Partition = tuple[str, int]


@click.command("reassign-partitions")
@click.option("--bootstrap-server", "bootstrap_server", required=True, metavar="HOST:PORT[,…]",
              help="The broker(s) to connect to.")
@click.option("--command-config", "command_config", metavar="FILE",
              help="Admin client properties file (for the metadata requests).")
@click.option("--generate", is_flag=True, help="Propose an assignment of --topics-to-move-json-file "
                                               "over --broker-list.")
@click.option("--execute", is_flag=True, help="Start the reassignment of --reassignment-json-file.")
@click.option("--verify", is_flag=True, help="Report whether the reassignment of "
                                             "--reassignment-json-file is complete.")
@click.option("--cancel", is_flag=True, help="Cancel the reassignments of --reassignment-json-file.")
@click.option("--list", "list_", is_flag=True, help="List the reassignments in progress.")
@click.option("--reassignment-json-file", "reassignment_file", type=click.Path(dir_okay=False),
              help="The partitions and their target replicas.")
@click.option("--topics-to-move-json-file", "topics_file", type=click.Path(dir_okay=False),
              help='The topics to propose an assignment for: {"version":1,"topics":[{"topic":"t"}]}.')
@click.option("--broker-list", "broker_list", metavar="ID,ID,…",
              help="The brokers to propose an assignment over (with --generate).")
@click.option("--additional", is_flag=True,
              help="Execute even though other reassignments are in progress.")
@click.option("--preserve-throttles", "preserve_throttles", is_flag=True,
              help="Do not report clearing throttles (--verify, --cancel).")
def reassign_partitions(bootstrap_server: str, command_config: str | None, generate: bool,
                        execute: bool, verify: bool, cancel: bool, list_: bool,
                        reassignment_file: str | None, topics_file: str | None,
                        broker_list: str | None, additional: bool, preserve_throttles: bool) -> None:
    """Move partitions between brokers, as kafka-reassign-partitions.sh."""
    chosen = [name for name, given in zip(ACTIONS, (generate, execute, verify, cancel, list_)) if given]
    if len(chosen) != 1:
        fail("Command must include exactly one action: " + ", ".join(f"--{a}" for a in ACTIONS))
    action = chosen[0]
    required = {"generate": (("--topics-to-move-json-file", topics_file), ("--broker-list", broker_list)),
                "list": ()}.get(action, (("--reassignment-json-file", reassignment_file),))
    missing = [name for name, value in required if value is None]
    if missing:
        fail(f"Missing required argument \"[{missing[0][2:]}]\"")
    tool = ReassignTool(bootstrap_server, admin_client(bootstrap_server, command_config))
    if action == "generate":
        tool.generate(_read(topics_file), broker_list)
    elif action == "execute":
        tool.execute(_parse_plan(_read(reassignment_file)), additional=additional)
    elif action == "verify":
        tool.verify(_parse_plan(_read(reassignment_file)), preserve_throttles=preserve_throttles)
    elif action == "cancel":
        tool.cancel(_parse_plan(_read(reassignment_file)), preserve_throttles=preserve_throttles)
    else:
        tool.list()


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        fail(f"Cannot read {path}: {e.strerror or e}.")


def _name(tp: Partition) -> str:
    return f"{tp[0]}-{tp[1]}"


def _ids(replicas) -> str:
    return ",".join(map(str, replicas))


def plan_json(assignment: dict[Partition, list[int]]) -> str:
    """Kafka's reassignment JSON (formatAsReassignmentJson): compact, partitions sorted."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": [ANY_LOG_DIR] * len(r)}
        for (t, p), r in sorted(assignment.items())]}, separators=(",", ":"))


def _parse_plan(text: str) -> dict[Partition, list[int]]:
    """A reassignment plan, checked as Kafka's parseExecuteAssignmentArgs checks it."""
    try:
        value = json.loads(text)
        if value.get("version", 1) != 1:
            fail(f"Not supported version field value {value['version']}")
        entries = [((str(p["topic"]), int(p["partition"])), [int(r) for r in p["replicas"]],
                    p.get("log_dirs")) for p in value.get("partitions") or []]
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        fail(f"The reassignment JSON is not valid: {e!r}.")
    if not entries:
        fail("Partition reassignment list cannot be empty")
    if any(not replicas for _, replicas, _ in entries):
        fail("Partition replica list cannot be empty")
    repeated = sorted(tp for tp, n in Counter(tp for tp, _, _ in entries).items() if n > 1)
    if repeated:
        fail("Partition reassignment contains duplicate topic partitions: " + ",".join(map(_name, repeated)))
    for tp, replicas, log_dirs in entries:
        if len(set(replicas)) != len(replicas):
            fail(f"Partition replica lists may not contain duplicate entries: {_name(tp)} contains "
                 f"multiple entries for {_ids(sorted({r for r in replicas if replicas.count(r) > 1}))}")
        if log_dirs is not None and any(d != ANY_LOG_DIR for d in log_dirs):
            fail(f"Moving {_name(tp)} between log directories is not supported by logbroker; "
                 f"use \"any\" in log_dirs.")
    return {tp: replicas for tp, replicas, _ in entries}


class ReassignTool:
    """The tool's actions; prints exactly what Kafka's ReassignPartitionsCommand prints."""

    def __init__(self, bootstrap: str, admin) -> None:
        self.bootstrap = bootstrap
        self.admin = admin

    # -- actions -------------------------------------------------------------------------------
    def generate(self, topics_json: str, broker_list: str) -> None:
        from logbroker.metadata.assignment import assign_replicas
        try:
            brokers = [int(b) for b in broker_list.split(",")]
            value = json.loads(topics_json)
            topics = [str(t["topic"]) for t in value.get("topics") or []]
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            fail(f"The topics JSON or the broker list is not valid: {e!r}.")
        for what, items in (("Broker list", brokers), ("List of topics to reassign", topics)):
            repeated = sorted(i for i, n in Counter(items).items() if n > 1)
            if repeated:
                fail(f"{what} contains duplicate entries: {repeated}")
        metadata = self._metadata()
        current = self._replicas(metadata, topics=topics)
        available = sorted(b for b in brokers if b in metadata.brokers)
        proposed = {}
        for topic in topics:
            partitions = sorted(p for t, p in current if t == topic)
            replication_factor = len(current[(topic, partitions[0])])
            try:
                assignment = assign_replicas(available, len(partitions), replication_factor)
            except Exception as e:  # noqa: BLE001 - logbroker's KafkaErrors, one sentence each
                fail(f"{e}")
            proposed.update({(topic, p): list(r) for p, r in assignment.items()})
        click.echo(f"Current partition replica assignment\n{plan_json(current)}\n")
        click.echo(f"Proposed partition reassignment configuration\n{plan_json(proposed)}")

    def execute(self, plan: dict[Partition, list[int]], *, additional: bool) -> None:
        if not additional and self._ongoing(None):
            fail(CANNOT_EXECUTE_BECAUSE_OF_EXISTING)
        metadata = self._metadata()
        unknown = sorted({r for replicas in plan.values() for r in replicas} - set(metadata.brokers))
        if unknown:
            fail(f"Unknown broker id {unknown[0]}")
        current = self._replicas(metadata, partitions=list(plan))
        click.echo(f"Current partition replica assignment\n\n{plan_json(current)}\n\n"
                   f"Save this to use as the --reassignment-json-file option during rollback")
        errors = self._alter(plan)
        if errors:
            fail("Error reassigning partition(s):\n" + "\n".join(
                f"{_name(tp)}: {message}" for tp, message in sorted(errors.items())))
        click.echo(f"Successfully started partition reassignment{'' if len(plan) == 1 else 's'} "
                   f"for {','.join(_name(tp) for tp in sorted(plan))}")

    def verify(self, plan: dict[Partition, list[int]], *, preserve_throttles: bool) -> None:
        ongoing = self._ongoing(None)
        metadata = self._metadata()
        lines = ["Status of partition reassignment:"]
        for tp, target in sorted(plan.items()):
            if tp in ongoing:
                lines.append(f"Reassignment of partition {_name(tp)} is still in progress.")
                continue
            topic = metadata.topics.get(tp[0])
            partition = topic.partitions.get(tp[1]) if topic is not None and topic.error is None else None
            current = list(partition.replicas) if partition is not None else []
            if current == target:
                lines.append(f"Reassignment of partition {_name(tp)} is completed.")
            else:
                lines.append(f"There is no active reassignment of partition {_name(tp)}, but replica "
                             f"set is {_ids(current)} rather than {_ids(target)}.")
        click.echo("\n".join(lines))
        click.echo("")  # the (empty) report of log-directory moves
        if not ongoing and not preserve_throttles:
            self._report_cleared_throttles(plan, metadata)

    def cancel(self, plan: dict[Partition, list[int]], *, preserve_throttles: bool) -> None:
        active = sorted(self._ongoing(list(plan)))
        if active:
            errors = self._alter(dict.fromkeys(active))
            if errors:
                fail(f"Error cancelling partition reassignment{'' if len(errors) == 1 else 's'} for:\n"
                     + "\n".join(f"{_name(tp)}: {message}" for tp, message in sorted(errors.items())))
            click.echo(f"Successfully cancelled partition reassignment{'' if len(active) == 1 else 's'} "
                       f"for: {','.join(map(_name, active))}")
        else:
            click.echo("None of the specified partition reassignments are active.")
        click.echo("None of the specified partition moves are active.", nl=False)  # as Kafka: no newline
        if not preserve_throttles:
            self._report_cleared_throttles(plan, self._metadata())

    def list(self) -> None:
        ongoing = self._ongoing(None)
        if not ongoing:
            click.echo("No partition reassignments found.")
            return
        click.echo("Current partition reassignments:")
        for tp, (replicas, adding, removing) in sorted(ongoing.items()):
            click.echo(f"{_name(tp)}: replicas: {_ids(replicas)}."
                       + (f" adding: {_ids(adding)}." if adding else "")
                       + (f" removing: {_ids(removing)}." if removing else ""))

    @staticmethod
    def _report_cleared_throttles(plan: dict[Partition, list[int]], metadata) -> None:
        brokers = sorted(set(metadata.brokers) | {r for replicas in plan.values() for r in replicas})
        topics = sorted({t for t, _ in plan})
        click.echo(f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} {_ids(brokers)}")
        click.echo(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} {','.join(topics)}")

    # -- cluster access ------------------------------------------------------------------------
    def _metadata(self):
        try:
            return self.admin.list_topics(timeout=TIMEOUT_S)
        except Exception as e:  # noqa: BLE001 - librdkafka's errors, reported as one sentence
            fail_with(e, self.bootstrap, what="Could not read the cluster metadata")

    def _replicas(self, metadata, *, topics: list[str] | None = None,
                  partitions: list[Partition] | None = None) -> dict[Partition, list[int]]:
        """The current replicas of every partition of `topics`, or of `partitions`."""
        found = {}
        for name in topics if topics is not None else sorted({t for t, _ in partitions}):
            topic = metadata.topics.get(name)
            if topic is None or topic.error is not None:
                if topics is not None:
                    fail(f"Topic {name} not found (UNKNOWN_TOPIC_OR_PARTITION).")
                continue
            found.update({(name, p.id): list(p.replicas) for p in topic.partitions.values()})
        if partitions is None:
            return found
        missing = [tp for tp in partitions if tp not in found]
        if missing:
            fail(f"Unable to find partition: {', '.join(map(_name, missing))} (UNKNOWN_TOPIC_OR_PARTITION).")
        return {tp: found[tp] for tp in partitions}

    def _alter(self, targets: dict[Partition, list[int] | None]) -> dict[Partition, str]:
        """AlterPartitionReassignments on the controller; the partitions that failed, with why."""
        from kio.schema.alter_partition_reassignments.v0.request import (
            AlterPartitionReassignmentsRequest, ReassignablePartition, ReassignableTopic)
        topics = sorted({t for t, _ in targets})
        request = AlterPartitionReassignmentsRequest(topics=tuple(
            ReassignableTopic(name=topic, partitions=tuple(
                ReassignablePartition(partition_index=p, replicas=None if r is None else tuple(r))
                for (t, p), r in sorted(targets.items()) if t == topic)) for topic in topics))
        response = self._to_controller(request)
        return {(t.name, p.partition_index): f"{p.error_message or ''} ({p.error_code.name.upper()})".strip()
                for t in response.responses for p in t.partitions if p.error_code.value != 0}

    def _ongoing(self, partitions: list[Partition] | None) -> dict[Partition, tuple[list, list, list]]:
        """ListPartitionReassignments on the controller: replicas, adding, removing."""
        from kio.schema.list_partition_reassignments.v0.request import (
            ListPartitionReassignmentsRequest, ListPartitionReassignmentsTopics)
        topics = None if partitions is None else tuple(
            ListPartitionReassignmentsTopics(name=topic, partition_indexes=tuple(
                p for t, p in sorted(partitions) if t == topic))
            for topic in sorted({t for t, _ in partitions}))
        response = self._to_controller(ListPartitionReassignmentsRequest(topics=topics))
        return {(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas),
                                              list(p.removing_replicas))
                for t in response.topics for p in t.partitions}

    def _to_controller(self, request):
        """Send `request` to the controller, following it while it moves (NOT_CONTROLLER)."""
        from logbroker.client import KafkaConnection
        from logbroker.errors import BY_CODE, NotControllerError

        deadline = time.monotonic() + TIMEOUT_S
        while True:
            metadata = self._metadata()
            controller = metadata.brokers.get(metadata.controller_id)
            if controller is not None:
                response = asyncio.run(_request(KafkaConnection(controller.host, controller.port,
                                                                client_id="reassign-partitions-tool"),
                                                request))
                code = response.error_code.value
                if code == 0:
                    return response
                if code != NotControllerError.code or time.monotonic() > deadline:
                    error = BY_CODE.get(code)
                    fail(f"{response.error_message or 'The controller refused the request'} "
                         f"({error.name if error else code}).")
            elif time.monotonic() > deadline:
                fail(f"The cluster at {self.bootstrap} has no controller (NOT_CONTROLLER).")
            time.sleep(0.5)


async def _request(connection, request):
    from logbroker.errors import KafkaError
    try:
        return await connection.request(request)
    except KafkaError as e:
        fail(f"The controller at {connection.host}:{connection.port} did not answer: {e}.")
    finally:
        await connection.close()
