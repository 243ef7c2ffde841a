"""Fuzzing a real broker with mutated requests of every (api key, version) it advertises.

Each case gets a well-formed response or a closed connection; afterwards the broker's log holds no
traceback and no ERROR, a fresh client is answered, a clean stop leaves a data dir in Kafka's
format, and a restart reads every checkpoint.

Seeded and reproducible: FUZZ_SEED (default 1) and FUZZ_COUNT (default 3000, a bounded run that
is part of `make test`; the SASL listener run takes a quarter of it); `make fuzz SEED=7 COUNT=100000` is the long run. A failing case is
reported with its index; FUZZ_ONLY=<index> replays just that case against a fresh broker.
"""

from __future__ import annotations

import os
import random
import re
import socket
import struct
import time
from collections import Counter

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kafka_fuzz import FuzzCases, FuzzFailure, all_versions, send_case
from logbroker.metadata.controller import validate_topic_name
from logbroker.records.builder import build_batch
from logbroker.storage.checkpoints import (
    CLEAN_SHUTDOWN_FILE,
    BrokerMetadata,
    OffsetCheckpointFile,
    PartitionMetadataFile,
)
from logbroker.storage.leader_epoch_cache import LeaderEpochCheckpointFile
from logbroker.testing import TEST_OVERRIDES, BrokerProcess
from logbroker.tools.dump_log import DumpOptions, dump_files
from logbroker.types import TopicPartition

SEED = int(os.environ.get("FUZZ_SEED", "1"))
COUNT = int(os.environ.get("FUZZ_COUNT", "3000"))
ONLY = os.environ.get("FUZZ_ONLY")
CASE_TIMEOUT_S = 5.0
TOPICS = ["fuzz-0", "fuzz-1"]
# Lines a client must never be able to cause.
BAD_LINE = re.compile(r"Traceback|\] ERROR |\] CRITICAL |Error reading|ignoring it")


@pytest.fixture
def fuzz_broker(tmp_path):
    broker = BrokerProcess(tmp_path, overrides={**TEST_OVERRIDES, "offsets.topic.num.partitions": "3",
                                                "num.partitions": "2"})
    broker.start()
    yield broker
    broker.kill()


def connect(bootstrap: str) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=CASE_TIMEOUT_S)


def prepare(bootstrap: str) -> list[bytes]:
    """Topics with data in them, so that requests naming them get past the first checks; returns
    their topic ids for the uuid fields."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, 2, 1) for t in TOPICS]).values():
        future.result(30)
    from clients import RawClient
    with RawClient(bootstrap) as raw:
        for topic in TOPICS:
            for partition in (0, 1):
                assert raw.produce(topic, partition, build_batch([(b"k", b"v")] * 3)).error_code == 0
        return [raw.topic_id(t).bytes for t in TOPICS]


@pytest.mark.timeout(max(300, COUNT // 20))
def test_fuzzed_requests_never_hurt_the_broker(fuzz_broker):
    bootstrap = fuzz_broker.bootstrap
    cases = FuzzCases(SEED, TOPICS, prepare(bootstrap))
    indexes = [int(ONLY)] if ONLY else range(COUNT)
    per_api = run_cases(bootstrap, fuzz_broker, cases.case, indexes, "")
    if not ONLY:
        missing = set(all_versions()) - set(per_api)
        assert not missing or len(indexes) < 2000, f"never fuzzed: {sorted(missing)}"
    after_the_fuzz(fuzz_broker)


@pytest.mark.timeout(max(300, COUNT // 40))
def test_fuzzed_requests_before_authentication_never_hurt_the_broker(tmp_path):
    """The surface an unauthenticated client reaches: a SASL listener (PLAIN and SCRAM), half of
    the cases its handshake, authenticate and ApiVersions requests, the rest anything else (refused
    until authenticated). A quarter of COUNT, from the same seed."""
    broker = BrokerProcess(tmp_path, overrides={
        **TEST_OVERRIDES, "offsets.topic.num.partitions": "3",
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'})
    broker.start()
    try:
        sasl = "127.0.0.1:" + re.search(r"SASL_PLAINTEXT://[^:,\s]+:(\d+)", broker.new_log_text())[1]
        topic_ids = prepare(broker.bootstrap)
        auth = FuzzCases(SEED, TOPICS, topic_ids, api_keys=(17, 18, 36))
        anything = FuzzCases(SEED, TOPICS, topic_ids)
        indexes = [int(ONLY)] if ONLY else range(max(COUNT // 4, 200))
        # Drawn per case (not alternating), so a handshake is often followed on its connection
        # by an authenticate, and a client that got in by its next requests.
        pick = lambda i: auth if random.Random(f"{SEED}:sasl:{i}").random() < 0.6 else anything  # noqa: E731
        run_cases(sasl, broker, lambda i: pick(i).case(i), indexes, "sasl ", on_connect=maybe_log_in)
        after_the_fuzz(broker)
    finally:
        broker.kill()


def maybe_log_in(sock: socket.socket, index: int) -> None:
    """Half the SASL connections log in first (PLAIN, alice), so that the cases after it reach
    the APIs as an authenticated client would."""
    if random.Random(f"{SEED}:login:{index}").random() < 0.5:
        return
    handshake = struct.pack(">hhih", 17, 1, 1, 5) + b"login" + struct.pack(">h", 5) + b"PLAIN"
    token = b"\x00alice\x00alice-secret"
    authenticate = (struct.pack(">hhih", 36, 2, 2, 5) + b"login" + b"\x00"
                    + bytes([len(token) + 1]) + token + b"\x00")
    for frame, error_at in ((handshake, 4), (authenticate, 5)):
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        answer = sock.recv(size, socket.MSG_WAITALL)
        assert struct.unpack_from(">h", answer, error_at)[0] == 0, answer


def run_cases(address: str, broker: BrokerProcess, case_of, indexes, what: str, *,
              on_connect=lambda sock, index: None) -> Counter:  # noqa: ANN001
    """Send each case (reconnecting after a close, then `on_connect`); fail on an ill-formed
    answer. Returns the cases sent per (api key, version)."""
    outcomes: Counter[str] = Counter()
    per_api: Counter[tuple[int, int]] = Counter()
    by_mutation: Counter[tuple[str, str]] = Counter()
    timeouts: list[str] = []
    sock = connect(address)
    on_connect(sock, -1)
    started = time.monotonic()
    try:
        for index in indexes:
            case = case_of(index)
            per_api[(case.api_key, case.version)] += 1
            try:
                outcome = send_case(sock, case, CASE_TIMEOUT_S)
            except FuzzFailure as exc:
                raise AssertionError(f"seed {SEED}: {exc}") from None
            outcomes[outcome] += 1
            by_mutation[(case.mutation, outcome)] += 1
            if outcome == "timeout":
                timeouts.append(case.describe())
            if outcome in ("closed", "timeout"):
                sock.close()
                sock = reconnect(address, broker, case)
                on_connect(sock, index)
    finally:
        sock.close()
    elapsed = time.monotonic() - started
    print(f"\n{what}fuzz seed {SEED}: {len(indexes)} cases in {elapsed:.1f} s, {dict(outcomes)}; by mutation: "
          + ", ".join(f"{m} {o} {n}" for (m, o), n in sorted(by_mutation.items()))
          + "".join(f"\n  timeout: {t}" for t in timeouts[:10]))
    assert len(timeouts) <= max(2, len(indexes) // 500), "\n".join(timeouts[:20])
    return per_api


def after_the_fuzz(broker: BrokerProcess) -> None:
    """A fresh client is served; nothing in the log a client must not cause; a clean stop leaves
    Kafka's layout; a restart reads every checkpoint."""
    still_answers(broker.bootstrap)
    bad = [line for line in broker.new_log_text().splitlines() if BAD_LINE.search(line)]
    assert not bad, f"seed {SEED}: the broker logged what a client must not cause:\n" + "\n".join(bad[:40])
    assert broker.stop() == 0
    check_data_dir(broker.data_dir)
    broker.start()
    restarted = broker.new_log_text()
    bad = [line for line in restarted.splitlines() if BAD_LINE.search(line)]
    assert not bad, "the restart did not read every checkpoint cleanly:\n" + "\n".join(bad[:40])
    still_answers(broker.bootstrap)


def reconnect(bootstrap: str, broker: BrokerProcess, case) -> socket.socket:  # noqa: ANN001
    try:
        return connect(bootstrap)
    except OSError as exc:
        raise AssertionError(f"seed {SEED}: the broker stopped accepting connections after "
                             f"{case.describe()}: {exc}\n{broker.new_log_text()[-3000:]}") from None


def still_answers(bootstrap: str) -> None:
    """A fresh client: ApiVersions, Metadata, and a produce and fetch on a new topic."""
    from clients import RawClient
    with RawClient(bootstrap) as raw:
        assert raw.request(18, 0).error_code == 0
        topic = f"after-fuzz-{time.monotonic_ns()}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        assert raw.produce(topic, 0, build_batch([(b"k", b"after")])).error_code == 0
        assert raw.fetch(topic, 0, 0).error_code == 0


def check_data_dir(data_dir) -> None:  # noqa: ANN001
    """After a clean stop: Kafka's layout, every file readable, every name legal."""
    assert (data_dir / CLEAN_SHUTDOWN_FILE).exists()
    assert BrokerMetadata.read(data_dir / "meta.properties") is not None
    for name in ("recovery-point-offset-checkpoint", "replication-offset-checkpoint",
                 "log-start-offset-checkpoint"):
        if (data_dir / name).exists():
            for tp in OffsetCheckpointFile(data_dir / name).read():
                validate_topic_name(tp.topic)
    segments = []
    for path in data_dir.iterdir():
        if not path.is_dir():
            continue
        tp = TopicPartition.from_dir_name(path.name)
        validate_topic_name(tp.topic)
        PartitionMetadataFile(path / "partition.metadata").read()
        LeaderEpochCheckpointFile(path / "leader-epoch-checkpoint").read()
        segments += sorted(p for p in path.iterdir() if p.suffix in (".log", ".index", ".timeindex"))
    problems = [o.text for o in dump_files(segments, DumpOptions(index_sanity_check=True)) if o.stderr]
    assert not problems, "\n".join(problems[:20])


def test_a_case_is_a_function_of_seed_and_index():
    one, two = FuzzCases(5, TOPICS), FuzzCases(5, TOPICS)
    assert [one.case(i) for i in (0, 17, 999)] == [two.case(i) for i in (0, 17, 999)]
    assert one.case(3) != FuzzCases(6, TOPICS).case(3)


def test_every_advertised_api_version_is_drawn():
    cases = FuzzCases(1, TOPICS)
    drawn = {(c.api_key, c.version) for c in map(cases.case, range(3000))}
    assert drawn == set(all_versions())


def test_null_mutation_hits_a_non_nullable_field():
    from logbroker.protocol.codec import decode_request
    from logbroker.protocol.errors import MalformedRequestError
    cases = FuzzCases(1, TOPICS)
    nulls = [c for c in map(cases.case, range(400)) if c.mutation == "null"][:20]
    for case in nulls:
        with pytest.raises(MalformedRequestError, match="non-nullable|truncated|past the end|cannot fit"):
            decode_request(memoryview(case.frame[4:]))
    assert nulls and struct.unpack(">i", nulls[0].frame[:4])[0] == len(nulls[0].frame) - 4
