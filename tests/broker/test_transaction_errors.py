"""The transaction APIs' answers to bad input, over raw kio requests: Kafka's error code for each,
and nothing else disturbed (the transaction goes on and commits afterwards)."""

from __future__ import annotations

import time

from logbroker.records.builder import build_batch

from clients import RawClient, create_topic

NONE, NOT_COORDINATOR, INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE = 0, 16, 47, 48
INVALID_PRODUCER_ID_MAPPING, INVALID_TRANSACTION_TIMEOUT, CONCURRENT_TRANSACTIONS = 49, 50, 51
UNKNOWN_TOPIC_OR_PARTITION, OPERATION_NOT_ATTEMPTED, PRODUCER_FENCED = 3, 55, 90
TRANSACTIONAL_ID_NOT_FOUND, UNSTABLE_OFFSET_COMMIT = 105, 88


def find(raw: RawClient, txn_id: str) -> None:
    assert raw.request(10, 3, key=txn_id, key_type=1).error_code == NONE


def init(raw: RawClient, txn_id: str, *, timeout_ms: int = 60_000, version: int = 4, **expected) -> tuple[int, int]:
    for _ in range(100):
        r = raw.request(22, version, transactional_id=txn_id, transaction_timeout=timeout_ms,
                        producer_id=expected.get("producer_id", -1), producer_epoch=expected.get("producer_epoch", -1))
        if r.error_code != CONCURRENT_TRANSACTIONS:
            break
        time.sleep(0.05)
    assert r.error_code == NONE, r
    return r.producer_id, r.producer_epoch


def add_partitions(raw: RawClient, txn_id: str, pid: int, epoch: int, topic: str, *partitions: int,
                   version: int = 3) -> dict[int, int]:
    r = raw.request(24, version, v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
                    v3_and_below_producer_epoch=epoch,
                    v3_and_below_topics=[{"name": topic, "partitions": list(partitions)}])
    return {p.partition_index: int(p.partition_error_code) for t in r.results_by_topic_v3_and_below
            for p in t.results_by_partition}


def end_txn(raw: RawClient, txn_id: str, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
    return int(raw.request(26, version, transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                           committed=commit).error_code)


def end_txn_retrying(raw: RawClient, *args) -> int:
    """EndTxn as a client sends it: again while CONCURRENT_TRANSACTIONS. An EndTxn is answered once
    Prepare* is stored; until the markers are written and Complete* is stored, a retry of the same
    EndTxn (or any EndTxn while the completion's own store is in flight) gets CONCURRENT_TRANSACTIONS,
    as in Kafka, and how many requests of the client's that lasts depends on the event loop."""
    for _ in range(100):
        code = end_txn(raw, *args)
        if code != CONCURRENT_TRANSACTIONS:
            return code
        time.sleep(0.05)
    return code


def describe(raw: RawClient, txn_id: str) -> dict:
    """DescribeTransactions, decoded by the CLI's reader: kio refuses the -1 start time of an
    Empty transaction."""
    from logbroker.cli.transactions import decode_describe_transactions
    raw.send(65, 0, transactional_ids=[txn_id])
    [state] = decode_describe_transactions(raw.receive_frame())
    return state


def txn_batch(pid: int, epoch: int, sequence: int = 0, values=(b"v",)) -> bytes:
    return build_batch([(None, v) for v in values], producer_id=pid, producer_epoch=epoch, base_sequence=sequence,
                       transactional=True)


def produce_txn(raw: RawClient, txn_id: str, topic: str, records: bytes) -> int:
    r = raw.request(0, 9, transactional_id=txn_id, acks=-1, timeout=5000,
                    topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": records}]}])
    return int(r.responses[0].partition_responses[0].error_code)


def test_unknown_transactional_id_and_wrong_producer_id(logbroker):
    create_topic(logbroker, "errs-1")
    with RawClient(logbroker) as raw:
        assert raw.request(22, 4, transactional_id="never-found", transaction_timeout=60_000,
                           producer_id=-1, producer_epoch=-1).error_code == NOT_COORDINATOR
        find(raw, "t-unknown")
        assert add_partitions(raw, "t-unknown", 1234, 0, "errs-1", 0) == {0: INVALID_PRODUCER_ID_MAPPING}
        assert end_txn(raw, "t-unknown", 1234, 0, True) == INVALID_PRODUCER_ID_MAPPING
        pid, epoch = init(raw, "t-unknown")
        assert add_partitions(raw, "t-unknown", pid + 1, epoch, "errs-1", 0) == {0: INVALID_PRODUCER_ID_MAPPING}
        assert add_partitions(raw, "t-unknown", pid, epoch, "no-such-topic", 0) == {0: UNKNOWN_TOPIC_OR_PARTITION}
        assert add_partitions(raw, "t-unknown", pid, epoch, "errs-1", 0, 7) == {
            0: OPERATION_NOT_ATTEMPTED, 7: UNKNOWN_TOPIC_OR_PARTITION}
        assert add_partitions(raw, "t-unknown", pid, epoch, "errs-1", 0) == {0: NONE}
        described = raw.request(65, 0, transactional_ids=["t-unknown", "t-missing"]).transaction_states
        assert [(d.transactional_id, d.error_code, d.transaction_state, d.producer_id) for d in described] == [
            ("t-unknown", NONE, "Ongoing", pid), ("t-missing", TRANSACTIONAL_ID_NOT_FOUND, "", -1)]
        assert [(t.topic, t.partitions) for t in described[0].topics] == [("errs-1", (0,))]

        def listed(duration_ms: int) -> list[str]:
            r = raw.request(66, 1, state_filters=["Ongoing"], producer_id_filters=[], duration_filter=duration_ms)
            return [t.transactional_id for t in r.transaction_states]
        assert listed(-1) == ["t-unknown"]
        assert listed(3_600_000) == []  # running for less than an hour
        too_long = raw.request(22, 4, transactional_id="t-unknown", transaction_timeout=900_001,
                               producer_id=-1, producer_epoch=-1)
        assert too_long.error_code == INVALID_TRANSACTION_TIMEOUT


def test_end_txn_out_of_order_and_stale_epochs(logbroker):
    create_topic(logbroker, "errs-2")
    with RawClient(logbroker) as raw:
        find(raw, "t-order")
        pid, epoch = init(raw, "t-order")
        assert end_txn(raw, "t-order", pid, epoch, True) == INVALID_TXN_STATE  # nothing begun
        assert add_partitions(raw, "t-order", pid, epoch, "errs-2", 0) == {0: NONE}
        assert produce_txn(raw, "t-order", "errs-2", txn_batch(pid, epoch)) == NONE
        assert end_txn(raw, "t-order", pid, epoch - 1 if epoch else epoch + 5, True) == PRODUCER_FENCED
        assert end_txn(raw, "t-order", pid, epoch + 5, True, version=1) == INVALID_PRODUCER_EPOCH
        assert end_txn(raw, "t-order", pid, epoch, True) == NONE
        assert end_txn_retrying(raw, "t-order", pid, epoch, False) == INVALID_TXN_STATE  # abort after commit
        assert end_txn_retrying(raw, "t-order", pid, epoch, True) == NONE  # a retried commit is answered again
        # A second producer with the same id fences the first.
        pid2, epoch2 = init(raw, "t-order")
        assert (pid2, epoch2) == (pid, epoch + 1)
        assert add_partitions(raw, "t-order", pid, epoch, "errs-2", 0) == {0: PRODUCER_FENCED}
        assert add_partitions(raw, "t-order", pid, epoch, "errs-2", 0, version=1) == {0: INVALID_PRODUCER_EPOCH}
        # KIP-360: the old producer cannot take the id back with its stale epoch.
        stale = raw.request(22, 4, transactional_id="t-order", transaction_timeout=60_000,
                            producer_id=pid, producer_epoch=epoch - 1 if epoch else 7)
        assert stale.error_code == PRODUCER_FENCED
        listed = raw.request(66, 1, state_filters=["CompleteCommit", "Bogus"], producer_id_filters=[],
                             duration_filter=-1)
        assert listed.unknown_state_filters == ("Bogus",)
        assert [t.transactional_id for t in listed.transaction_states] == []
        listed = raw.request(66, 1, state_filters=[], producer_id_filters=[pid], duration_filter=-1)
        assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [("t-order", "Empty")]


def test_transactional_batch_for_a_partition_not_in_the_transaction_is_refused(logbroker):
    create_topic(logbroker, "errs-3")
    with RawClient(logbroker) as raw:
        find(raw, "t-verify")
        pid, epoch = init(raw, "t-verify")
        assert produce_txn(raw, "t-verify", "errs-3", txn_batch(pid, epoch)) == INVALID_TXN_STATE
        assert add_partitions(raw, "t-verify", pid, epoch, "errs-3", 0) == {0: NONE}
        assert produce_txn(raw, "t-verify", "errs-3", txn_batch(pid, epoch)) == NONE
        assert end_txn(raw, "t-verify", pid, epoch, False) == NONE
        # The broker-side verify form (v4) answers what the coordinator knows.
        r = raw.request(24, 4, transactions=[{"transactional_id": "t-verify", "producer_id": pid,
                                              "producer_epoch": epoch, "verify_only": True,
                                              "topics": [{"name": "errs-3", "partitions": [0]}]}])
        codes = [int(p.partition_error_code) for t in r.results_by_transaction for tr in t.topic_results
                 for p in tr.results_by_partition]
        assert r.error_code == NONE and codes in ([INVALID_TXN_STATE], [CONCURRENT_TRANSACTIONS])


def test_txn_offset_commit_for_a_group_not_added_and_pending_offsets(logbroker):
    create_topic(logbroker, "errs-4")
    with RawClient(logbroker) as raw:
        find(raw, "t-offsets")
        assert raw.request(10, 3, key="g-offsets", key_type=0).error_code == NONE
        pid, epoch = init(raw, "t-offsets")
        commit = dict(transactional_id="t-offsets", group_id="g-offsets", producer_id=pid, producer_epoch=epoch,
                      generation_id=-1, member_id="", group_instance_id=None,
                      topics=[{"name": "errs-4", "partitions": [{"partition_index": 0, "committed_offset": 42,
                                                                "committed_leader_epoch": -1,
                                                                "committed_metadata": "m"}]}])

        def txn_commit() -> int:
            r = raw.request(28, 3, **commit)
            return int(r.topics[0].partitions[0].error_code)

        assert txn_commit() == INVALID_TXN_STATE
        added = raw.request(25, 3, transactional_id="t-offsets", producer_id=pid, producer_epoch=epoch,
                            group_id="g-offsets")
        assert added.error_code == NONE
        assert txn_commit() == NONE

        def fetch(require_stable: bool):
            r = raw.request(9, 8, groups=[{"group_id": "g-offsets", "topics": [
                {"name": "errs-4", "partition_indexes": [0]}]}], require_stable=require_stable)
            p = r.groups[0].topics[0].partitions[0]
            return int(p.error_code), p.committed_offset

        assert fetch(False) == (NONE, -1)
        assert fetch(True) == (UNSTABLE_OFFSET_COMMIT, -1)
        assert end_txn(raw, "t-offsets", pid, epoch, True) == NONE
        for _ in range(100):
            if fetch(True) == (NONE, 42):
                break
            time.sleep(0.05)
        assert fetch(True) == (NONE, 42)


def test_idle_transactional_id_expires_with_a_tombstone(logbroker_process):
    broker = logbroker_process
    broker.overrides.update({"transactional.id.expiration.ms": "500",
                             "transaction.remove.expired.transaction.cleanup.interval.ms": "200"})
    broker.kill()
    broker.start()
    with RawClient(broker.bootstrap) as raw:
        find(raw, "t-expire")
        pid, _ = init(raw, "t-expire")
        assert describe(raw, "t-expire")["transaction_state"] == "Empty"
        for _ in range(100):
            state = describe(raw, "t-expire")
            if state["error_code"] == TRANSACTIONAL_ID_NOT_FOUND:
                break
            time.sleep(0.1)
        assert state["error_code"] == TRANSACTIONAL_ID_NOT_FOUND
    broker.kill()
    broker.start()  # the tombstone is replayed: still gone, and a new init starts over
    with RawClient(broker.bootstrap) as raw:
        find(raw, "t-expire")
        assert describe(raw, "t-expire")["error_code"] == TRANSACTIONAL_ID_NOT_FOUND
        new_pid, epoch = init(raw, "t-expire")
        assert new_pid != pid and epoch == 0


def test_offsets_of_a_transaction_open_at_kill_9_stay_pending_then_abort(logbroker_process):
    broker = logbroker_process
    broker.overrides["transaction.abort.timed.out.transaction.cleanup.interval.ms"] = "200"
    broker.kill()
    broker.start()
    create_topic(broker.bootstrap, "errs-5")
    with RawClient(broker.bootstrap) as raw:
        find(raw, "t-crash-offsets")
        assert raw.request(10, 3, key="g-crash", key_type=0).error_code == NONE
        pid, epoch = init(raw, "t-crash-offsets", timeout_ms=2000)
        assert raw.request(25, 3, transactional_id="t-crash-offsets", producer_id=pid, producer_epoch=epoch,
                           group_id="g-crash").error_code == NONE
        r = raw.request(28, 3, transactional_id="t-crash-offsets", group_id="g-crash", producer_id=pid,
                        producer_epoch=epoch, generation_id=-1, member_id="", group_instance_id=None,
                        topics=[{"name": "errs-5", "partitions": [{"partition_index": 0, "committed_offset": 9,
                                                                  "committed_leader_epoch": -1,
                                                                  "committed_metadata": ""}]}])
        assert r.topics[0].partitions[0].error_code == NONE
    broker.kill()
    broker.start()

    def fetch(raw, require_stable: bool):
        r = raw.request(9, 8, groups=[{"group_id": "g-crash", "topics": [
            {"name": "errs-5", "partition_indexes": [0]}]}], require_stable=require_stable)
        p = r.groups[0].topics[0].partitions[0]
        return int(p.error_code), p.committed_offset

    with RawClient(broker.bootstrap) as raw:
        for _ in range(100):  # loading, then pending until the timeout aborts the transaction
            if raw.request(10, 3, key="g-crash", key_type=0).error_code == NONE and fetch(raw, False)[0] == NONE:
                break
            time.sleep(0.1)
        assert fetch(raw, False) == (NONE, -1)
        for _ in range(100):
            if fetch(raw, True) == (NONE, -1):
                break
            time.sleep(0.1)
        assert fetch(raw, True) == (NONE, -1)  # aborted on timeout: never committed
        [state] = raw.request(65, 0, transactional_ids=["t-crash-offsets"]).transaction_states
        assert state.transaction_state == "CompleteAbort"


def test_exhausted_epoch_gets_a_new_producer_id(logbroker_process):
    from logbroker.coordinator.transaction_log import (
        TRANSACTION_STATE_TOPIC,
        TransactionLogValue,
        encode_key,
        encode_value,
        partition_for,
    )
    broker = logbroker_process
    with RawClient(broker.bootstrap) as raw:
        find(raw, "t-exhausted")
        pid, _ = init(raw, "t-exhausted")
        # What 32766 InitProducerIds would have left behind, written as the coordinator writes it.
        record = encode_value(TransactionLogValue(pid, 32766, 60_000, 0, (), 1, -1))
        assert raw.produce(TRANSACTION_STATE_TOPIC, partition_for("t-exhausted", 50),
                           build_batch([(encode_key("t-exhausted"), record)])).error_code == NONE
    broker.kill()
    broker.start()
    with RawClient(broker.bootstrap) as raw:
        new_pid, epoch = init(raw, "t-exhausted")
        assert new_pid != pid and epoch == 0


def test_transaction_loaded_in_prepare_commit_resumes_its_markers(logbroker_process):
    """A coordinator that stored PrepareCommit and died before the markers: the next one to load
    the partition writes them and completes the commit."""
    from logbroker.coordinator.transaction_log import (
        TRANSACTION_STATE_TOPIC,
        TransactionLogValue,
        encode_key,
        encode_value,
        partition_for,
    )
    from logbroker.coordinator.transaction_metadata import TransactionState
    from logbroker.types import TopicPartition
    broker = logbroker_process
    create_topic(broker.bootstrap, "errs-6")
    with RawClient(broker.bootstrap) as raw:
        find(raw, "t-resume")
        pid, epoch = init(raw, "t-resume")
        assert add_partitions(raw, "t-resume", pid, epoch, "errs-6", 0) == {0: NONE}
        assert produce_txn(raw, "t-resume", "errs-6", txn_batch(pid, epoch, values=(b"a", b"b"))) == NONE
        prepared = encode_value(TransactionLogValue(pid, epoch, 60_000, TransactionState.PREPARE_COMMIT,
                                                    (TopicPartition("errs-6", 0),), 2, 1))
        assert raw.produce(TRANSACTION_STATE_TOPIC, partition_for("t-resume", 50),
                           build_batch([(encode_key("t-resume"), prepared)])).error_code == NONE
    broker.kill()
    broker.start()
    with RawClient(broker.bootstrap) as raw:
        for _ in range(100):
            state = describe(raw, "t-resume")
            if state["transaction_state"] == "CompleteCommit":
                break
            time.sleep(0.1)
        assert state["transaction_state"] == "CompleteCommit"
        response = raw.request(2, 7, replica_id=-1, isolation_level=1, topics=[
            {"name": "errs-6", "partitions": [{"partition_index": 0, "timestamp": -1}]}])
        assert response.topics[0].partitions[0].offset == 3  # two records and the COMMIT marker, stable


def test_kip_360_init_producer_id_bumps_retries_and_fences(logbroker):
    with RawClient(logbroker) as raw:
        find(raw, "t-kip360")
        pid, zombie_epoch = init(raw, "t-kip360")
        _, epoch = init(raw, "t-kip360")  # a new producer: the first one is a zombie now
        assert epoch == zombie_epoch + 1

        def init_expecting(expected_epoch: int):
            r = raw.request(22, 4, transactional_id="t-kip360", transaction_timeout=60_000, producer_id=pid,
                            producer_epoch=expected_epoch)
            return int(r.error_code), r.producer_id, r.producer_epoch
        assert init_expecting(zombie_epoch)[0] == PRODUCER_FENCED
        assert init_expecting(epoch) == (NONE, pid, epoch + 1)  # the current producer resets its epoch
        assert init_expecting(epoch) == (NONE, pid, epoch + 1)  # its retry gets the same answer
        assert init_expecting(epoch - 1)[0] == PRODUCER_FENCED
        assert raw.request(22, 3, transactional_id="t-kip360", transaction_timeout=60_000, producer_id=pid,
                           producer_epoch=zombie_epoch).error_code == INVALID_PRODUCER_EPOCH  # v3: pre-KIP-588
