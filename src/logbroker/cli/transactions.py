"""`logbroker transactions`: kafka-transactions.sh — inspect transactions and recover hanging ones,
against logbroker or any Kafka cluster.

    logbroker transactions [--bootstrap-server H:P] list
    logbroker transactions describe --transactional-id ID
    logbroker transactions describe-producers --topic T --partition P [--broker-id B]
    logbroker transactions abort --topic T --partition P (--start-offset O
                                 | --producer-id I --producer-epoch E --coordinator-epoch C)
    logbroker transactions find-hanging (--broker-id B | --topic T [--partition P])
                                        [--max-transaction-timeout MINUTES]

The same verbs, columns and messages as Kafka's tool (its prettyPrintTable: each column padded to
its widest cell, then a tab). `list` asks every broker (ListTransactions), `describe` the id's
coordinator (FindCoordinator, DescribeTransactions), `describe-producers` the partition leader or
the given broker (DescribeProducers). `abort` writes an ABORT marker through the partition
leader's WriteTxnMarkers, as Kafka's Admin.abortTransaction does; with --start-offset the
producer is the one whose open transaction starts there. `find-hanging` lists open transactions
(DescribeProducers) older than the maximum timeout whose coordinator no longer has their partition
in an ongoing transaction. Errors are one line on stderr, exit code 1. `--command-config` takes the
admin client's security properties: security.protocol, sasl.mechanism with sasl.jaas.config (or
sasl.username / sasl.password), ssl.ca.location (or ssl.truststore.location as a PEM file).
"""

from __future__ import annotations

import struct
import time

import click

from logbroker.cli.admin_connections import AdminConnections, client_security, run_admin
from logbroker.cli.common import bootstrap_option, fail, load_properties_file, table
from logbroker.errors import error_name

LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                    "TopicPartitions")
PRODUCERS_HEADERS = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                     "CurrentTransactionStartOffset")
HANGING_HEADERS = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                   "LastTimestamp", "Duration(min)")


class TxnAdmin(AdminConnections):
    """The few requests the tool needs, over logbroker.client connections (asyncio)."""

    def __init__(self, bootstrap: str, security=None) -> None:
        super().__init__(bootstrap, security, client_id="logbroker-transactions")
        self.partitions: dict[tuple[str, int], tuple[int, tuple[int, ...]]] = {}

    async def metadata(self, topics: list[str] | None) -> None:
        from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
        request = MetadataRequest(topics=None if topics is None else tuple(MetadataRequestTopic(name=t, topic_id=None)
                                                                           for t in topics),
                                  allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        response = await self._bootstrap.request(request)
        self.brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        for t in response.topics:
            if int(t.error_code):
                fail(f"Topic {t.name}: {error_name(int(t.error_code))}.")
            for p in t.partitions:
                self.partitions[(t.name, p.partition_index)] = (p.leader_id, tuple(p.replica_nodes))

    async def list_transactions(self, broker_id: int, producer_ids=()) -> list:
        from kio.schema.list_transactions.v0.request import ListTransactionsRequest
        response = await self.connection(broker_id).request(
            ListTransactionsRequest(state_filters=(), producer_id_filters=tuple(producer_ids)))
        if int(response.error_code):
            raise click.ClickException(f"broker {broker_id} answered {error_name(int(response.error_code))}")
        return list(response.transaction_states)

    async def coordinator(self, transactional_id: str) -> int:
        from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest
        response = await self._bootstrap.request(FindCoordinatorRequest(key=transactional_id, key_type=1))
        if int(response.error_code):
            fail(f"Failed to describe transaction state of transactional-id `{transactional_id}`: "
                 f"{error_name(int(response.error_code))}.")
        return response.node_id

    async def describe_transaction(self, broker_id: int, transactional_id: str) -> dict:
        from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
        frame = await self.connection(broker_id).request_frame(
            DescribeTransactionsRequest(transactional_ids=(transactional_id,)))
        [state] = decode_describe_transactions(frame)
        return state

    async def describe_producers(self, broker_id: int, topic: str, partition: int):
        from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
        response = await self.connection(broker_id).request(DescribeProducersRequest(
            topics=(TopicRequest(name=topic, partition_indexes=(partition,)),)))
        [p] = response.topics[0].partitions
        return int(p.error_code), list(p.active_producers)

    async def abort(self, leader: int, topic: str, partition: int, producer_id: int, producer_epoch: int,
                    coordinator_epoch: int) -> int:
        from kio.schema.write_txn_markers.v1.request import (
            WritableTxnMarker,
            WritableTxnMarkerTopic,
            WriteTxnMarkersRequest,
        )
        response = await self.connection(leader).request(WriteTxnMarkersRequest(markers=(WritableTxnMarker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=False,
            topics=(WritableTxnMarkerTopic(name=topic, partition_indexes=(partition,)),),
            coordinator_epoch=coordinator_epoch),)))
        return int(response.markers[0].topics[0].partitions[0].error_code)


def decode_describe_transactions(frame: bytes) -> list[dict]:
    """DescribeTransactions v0's response (flexible), read by hand: kio refuses the -1 start
    time Kafka sends for a transaction that has not begun."""
    pos = 4  # correlation id

    def uvarint() -> int:
        nonlocal pos
        shift = value = 0
        while True:
            byte = frame[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def take(fmt: str) -> int:
        nonlocal pos
        (value,) = struct.unpack_from(fmt, frame, pos)
        pos += struct.calcsize(fmt)
        return value

    def string() -> str:
        nonlocal pos
        n = uvarint() - 1
        text = frame[pos:pos + n].decode()
        pos += n
        return text

    def skip_tags() -> None:
        nonlocal pos
        for _ in range(uvarint()):
            uvarint()
            pos += uvarint()

    skip_tags()  # response header v1
    take(">i")  # throttle time
    states = []
    for _ in range(uvarint() - 1):
        state = {"error_code": take(">h"), "transactional_id": string(), "transaction_state": string(),
                 "transaction_timeout_ms": take(">i"), "transaction_start_time_ms": take(">q"),
                 "producer_id": take(">q"), "producer_epoch": take(">h"), "partitions": []}
        for _ in range(uvarint() - 1):
            topic = string()
            state["partitions"] += [(topic, take(">i")) for _ in range(uvarint() - 1)]
            skip_tags()
        skip_tags()
        states.append(state)
    return states


def _run(target: tuple[str, dict[str, str]], work):
    bootstrap, props = target
    return run_admin(bootstrap, lambda: TxnAdmin(bootstrap, client_security(props)), work)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@bootstrap_option
@click.option("--command-config", type=click.Path(dir_okay=False),
              help="A properties file of admin client configs (security).")
@click.pass_context
def transactions(ctx: click.Context, bootstrap_server: str, command_config: str | None) -> None:
    """Analyze the transactional state of producers in the cluster; detect and recover from
    hanging transactions (kafka-transactions.sh)."""
    ctx.obj = (bootstrap_server, load_properties_file(command_config, "--command-config"))


@transactions.command("list")
@click.pass_obj
def list_(target: tuple) -> None:
    """List transactions."""
    async def work(admin: TxnAdmin) -> list:
        await admin.metadata([])
        rows = []
        for broker_id in sorted(admin.brokers):
            for t in await admin.list_transactions(broker_id):
                rows.append((t.transactional_id, str(broker_id), str(t.producer_id), t.transaction_state))
        return rows
    click.echo(table(LIST_HEADERS, _run(target, work), tabbed=True))


@transactions.command("describe")
@click.option("--transactional-id", required=True, help="transactional id")
@click.pass_obj
def describe(target: tuple, transactional_id: str) -> None:
    """Describe the state of an active transactional-id."""
    async def work(admin: TxnAdmin):
        await admin.metadata([])
        coordinator = await admin.coordinator(transactional_id)
        return coordinator, await admin.describe_transaction(coordinator, transactional_id)
    coordinator, state = _run(target, work)
    if state["error_code"]:
        fail(f"Failed to describe transaction state of transactional-id `{transactional_id}`: "
             f"{error_name(state['error_code'])}.")
    start = state["transaction_start_time_ms"]
    started, duration = (str(start), str(int(time.time() * 1000) - start)) if start >= 0 else ("None", "None")
    row = (str(coordinator), transactional_id, str(state["producer_id"]), str(state["producer_epoch"]),
           state["transaction_state"], str(state["transaction_timeout_ms"]), started, duration,
           ",".join(f"{t}-{p}" for t, p in state["partitions"]))
    click.echo(table(DESCRIBE_HEADERS, [row], tabbed=True))


@transactions.command("describe-producers")
@click.option("--broker-id", type=int, help="optional broker id to describe the producer state on a specific replica")
@click.option("--topic", required=True, help="topic name")
@click.option("--partition", type=int, required=True, help="partition number")
@click.pass_obj
def describe_producers(target: tuple, broker_id: int | None, topic: str, partition: int) -> None:
    """Describe the states of active producers for a topic partition."""
    async def work(admin: TxnAdmin):
        await admin.metadata([topic])
        target = broker_id if broker_id is not None else _leader(admin, topic, partition)
        return await admin.describe_producers(target, topic, partition)
    code, producers = _run(target, work)
    if code:
        where = f"broker {broker_id}" if broker_id is not None else "leader"
        fail(f"Failed to describe producers for partition {topic}-{partition} on {where}: {error_name(code)}.")
    rows = [(str(p.producer_id), str(p.producer_epoch), str(p.coordinator_epoch), str(p.last_sequence),
             str(p.last_timestamp), str(p.current_txn_start_offset) if p.current_txn_start_offset >= 0 else "None")
            for p in producers]
    click.echo(table(PRODUCERS_HEADERS, rows, tabbed=True))


def _leader(admin: TxnAdmin, topic: str, partition: int) -> int:
    if (topic, partition) not in admin.partitions:
        fail(f"Partition {topic}-{partition} does not exist (UNKNOWN_TOPIC_OR_PARTITION).")
    leader = admin.partitions[(topic, partition)][0]
    if leader < 0:
        fail(f"Partition {topic}-{partition} has no leader (LEADER_NOT_AVAILABLE).")
    return leader


@transactions.command("abort")
@click.option("--topic", required=True, help="topic name")
@click.option("--partition", type=int, required=True, help="partition number")
@click.option("--start-offset", type=int, help="start offset of the transaction to abort")
@click.option("--producer-id", type=int, help="producer id")
@click.option("--producer-epoch", type=int, help="producer epoch")
@click.option("--coordinator-epoch", type=int, help="coordinator epoch")
@click.pass_obj
def abort(target: tuple, topic: str, partition: int, start_offset: int | None, producer_id: int | None,
          producer_epoch: int | None, coordinator_epoch: int | None) -> None:
    """Abort a hanging transaction (requires administrative privileges)."""
    if start_offset is None and producer_id is None:
        fail("The transaction to abort must be identified either with --start-offset (for brokers on 3.0 or "
             "above) or with --producer-id, --producer-epoch, and --coordinator-epoch (for older brokers)")
    if start_offset is None and producer_epoch is None:
        fail("Missing required argument --producer-epoch")
    if start_offset is None and coordinator_epoch is None:
        fail("Missing required argument --coordinator-epoch")

    async def work(admin: TxnAdmin) -> tuple[int, tuple]:
        await admin.metadata([topic])
        leader = _leader(admin, topic, partition)
        if start_offset is None:
            spec = (producer_id, producer_epoch, max(coordinator_epoch, 0))
        else:
            code, producers = await admin.describe_producers(leader, topic, partition)
            if code:
                fail(f"Failed to validate producer state for partition {topic}-{partition}: {error_name(code)}.")
            found = next((p for p in producers if p.current_txn_start_offset == start_offset), None)
            if found is None:
                fail(f"Could not find any open transactions starting at offset {start_offset} on partition "
                     f"{topic}-{partition}")
            spec = (found.producer_id, found.producer_epoch, max(found.coordinator_epoch, 0))
        return await admin.abort(leader, topic, partition, *spec), spec
    code, spec = _run(target, work)
    if code:
        fail(f"Failed to abort transaction of producer id {spec[0]} (epoch {spec[1]}) on {topic}-{partition}: "
             f"{error_name(code)}.")


@transactions.command("find-hanging")
@click.option("--broker-id", type=int, help="broker id to search for hanging transactions")
@click.option("--max-transaction-timeout", type=int, default=15, show_default=True,
              help="maximum transaction timeout in minutes to limit the scope of the search")
@click.option("--topic", help="topic name to limit search to")
@click.option("--partition", type=int, help="partition number")
@click.pass_obj
def find_hanging(target: tuple, broker_id: int | None, max_transaction_timeout: int, topic: str | None,
                 partition: int | None) -> None:
    """Find hanging transactions."""
    if topic is None and broker_id is None:
        fail("The `find-hanging` command requires either --topic or --broker-id to limit the scope of the search")
    if partition is not None and topic is None:
        fail("The --partition argument requires --topic to be provided")
    max_ms = max_transaction_timeout * 60_000

    async def work(admin: TxnAdmin) -> list:
        await admin.metadata(None if topic is None else [topic])
        now = int(time.time() * 1000)
        candidates = []
        for (t, p), (leader, replicas) in sorted(admin.partitions.items()):
            if (topic is not None and t != topic) or (partition is not None and p != partition):
                continue
            if broker_id is not None and broker_id not in replicas:
                continue
            code, producers = await admin.describe_producers(broker_id if broker_id is not None else leader, t, p)
            if code:
                fail(f"Failed to describe producers for partition {t}-{p}: {error_name(code)}.")
            candidates += [((t, p), s) for s in producers
                           if s.current_txn_start_offset >= 0 and now - s.last_timestamp > max_ms]
        if not candidates:
            return []
        ids = {}
        for b in sorted(admin.brokers):
            for listing in await admin.list_transactions(b, {s.producer_id for _, s in candidates}):
                ids[listing.producer_id] = listing.transactional_id
        hanging = []
        for tp, state in candidates:
            txn_id = ids.get(state.producer_id)
            if txn_id is not None:
                described = await admin.describe_transaction(await admin.coordinator(txn_id), txn_id)
                if not described["error_code"] and tp in described["partitions"]:
                    continue
            hanging.append((tp, state, now))
        return hanging
    rows = [(t, str(p), str(s.producer_id), str(s.producer_epoch), str(s.coordinator_epoch),
             str(s.current_txn_start_offset), str(s.last_timestamp), str((now - s.last_timestamp) // 60_000))
            for (t, p), s, now in _run(target, work)]
    click.echo(table(HANGING_HEADERS, rows, tabbed=True))
