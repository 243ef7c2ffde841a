"""A share-group workload for the cluster failover tests: a producer and share consumers (real
confluent-kafka clients, each in its own thread) that keep a journal of every delivery and every
commit, and the checks run on that journal afterwards.

Each record's value says how its consumers acknowledge it: `v<i>` is ACCEPTed, except every
REJECT_EVERY-th (REJECT) and every POISON_EVERY-th, which is always RELEASEd until the delivery
limit archives it. A consumer acknowledges each poll's records explicitly and then commits them
(commit_sync), so every commit's offsets are known, with its outcome per partition.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

import confluent_kafka as ck

ACCEPT, RELEASE, REJECT = ck.AcknowledgeType.ACCEPT, ck.AcknowledgeType.RELEASE, ck.AcknowledgeType.REJECT
NAMES = {ACCEPT: "ACCEPT", RELEASE: "RELEASE", REJECT: "REJECT"}
REJECT_EVERY = 10
POISON_EVERY = 37


def ack_type_of(index: int):
    if index % POISON_EVERY == 5:
        return RELEASE
    if index % REJECT_EVERY == 7:
        return REJECT
    return ACCEPT


@dataclass(frozen=True, slots=True)
class Delivery:
    at: float  # time.monotonic() when poll returned it
    consumer: int
    partition: int
    offset: int
    index: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class Commit:
    started: float
    finished: float
    consumer: int
    partition: int
    deliveries: tuple[Delivery, ...]
    error: str | None  # None: the broker said it succeeded
    error_code: int = 0  # librdkafka's: < 0 a local error (the outcome is unknown), > 0 the broker's answer


@dataclass
class ShareWorkload:
    bootstrap: str
    topic: str
    group: str
    partitions: int
    consumers: int = 3
    rate_per_s: float = 300.0
    deliveries: list[Delivery] = field(default_factory=list)
    commits: list[Commit] = field(default_factory=list)
    produced: dict[tuple[int, int], int] = field(default_factory=dict)  # (partition, offset) -> index
    producer_errors: list[str] = field(default_factory=list)
    consumer_errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._producing = threading.Event()
        self._consuming = threading.Event()
        self._threads: list[threading.Thread] = []

    # -- running ---------------------------------------------------------------------------------
    def start(self) -> ShareWorkload:
        self._producing.set()
        self._consuming.set()
        self._threads = [threading.Thread(target=self._produce, name="producer", daemon=True)]
        self._threads += [threading.Thread(target=self._consume, args=(i,), name=f"consumer-{i}", daemon=True)
                          for i in range(self.consumers)]
        for thread in self._threads:
            thread.start()
        return self

    def stop_producing(self) -> None:
        self._producing.clear()
        self._threads[0].join(60)

    def stop(self) -> None:
        self._producing.clear()
        self._consuming.clear()
        for thread in self._threads:
            thread.join(60)

    def _produce(self) -> None:
        producer = ck.Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                                "linger.ms": 5, "message.timeout.ms": 120_000})

        def delivered(error, message) -> None:
            if error is not None:
                self.producer_errors.append(str(error))
                return
            with self._lock:
                self.produced[(message.partition(), message.offset())] = int(message.value()[1:])
        index = 0
        interval_s = 1 / self.rate_per_s
        while self._producing.is_set():
            producer.produce(self.topic, value=f"v{index}".encode(), partition=index % self.partitions,
                             on_delivery=delivered)
            index += 1
            producer.poll(interval_s)
        if producer.flush(120) != 0:
            self.producer_errors.append("records left unflushed")

    def _consume(self, i: int) -> None:
        consumer = ck.ShareConsumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                                     "share.acknowledgement.mode": "explicit"})
        consumer.subscribe([self.topic])
        try:
            while self._consuming.is_set():
                try:
                    batch = consumer.poll(0.5)
                except ck.KafkaException as exc:
                    self.consumer_errors.append(f"consumer {i} poll: {exc}")
                    continue
                now = time.monotonic()
                polled = []
                for message in batch or ():
                    if message.error() is not None:
                        continue
                    delivery = Delivery(now, i, message.partition(), message.offset(),
                                        int(message.value()[1:]), message.delivery_count())
                    polled.append(delivery)
                    consumer.acknowledge(message, ack_type_of(delivery.index))
                if not polled:
                    continue
                with self._lock:
                    self.deliveries += polled
                self._commit(consumer, i, polled)
        finally:
            consumer.close()

    def _commit(self, consumer, i: int, polled: list[Delivery]) -> None:
        started = time.monotonic()
        try:
            results = {tp.partition: error for tp, error in consumer.commit_sync(30).items()}
        except ck.KafkaException as exc:
            results = {p: exc for p in {d.partition for d in polled}}
        finished = time.monotonic()
        by_partition: dict[int, list[Delivery]] = defaultdict(list)
        for delivery in polled:
            by_partition[delivery.partition].append(delivery)
        with self._lock:
            for partition, deliveries in by_partition.items():
                error = results.get(partition, "no result for the partition")
                code = error.args[0].code() if isinstance(error, ck.KafkaException) else 0
                self.commits.append(Commit(started, finished, i, partition, tuple(deliveries),
                                           None if error is None else str(error), code))

    # -- waiting ---------------------------------------------------------------------------------
    def settled(self) -> set[tuple[int, int]]:
        """The records settled for good: a successful commit of an ACCEPT or REJECT; or whose last
        delivery's commit failed locally (the connection broke: the outcome is unknown) and that
        was not delivered again — the broker may well have persisted it before it died."""
        with self._lock:
            commits, deliveries = list(self.commits), list(self.deliveries)
        last = {(d.partition, d.offset): d for d in sorted(deliveries, key=lambda d: d.at)}
        done = set()
        for commit in commits:
            for d in commit.deliveries:
                if ack_type_of(d.index) == RELEASE:
                    continue
                unknown = commit.error_code < 0 and last[(d.partition, d.offset)] == d
                if commit.error is None or unknown:
                    done.add((d.partition, d.offset))
        return done

    def wait_settled(self, timeout_s: float) -> None:
        """Until every produced record but the poison ones is settled (or the time is up)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                wanted = {k for k, index in self.produced.items() if ack_type_of(index) != RELEASE}
            if wanted <= self.settled():
                return
            time.sleep(0.5)

    def progress(self) -> int:
        """How many commits succeeded so far."""
        with self._lock:
            return sum(1 for c in self.commits if c.error is None)


def failed_while_up(workload: ShareWorkload, windows: list[tuple[float, float]]) -> list[Commit]:
    """The commits that failed although they were made while every broker was up (within one of
    `windows`, (from, to) in time.monotonic())."""
    return [c for c in workload.commits if c.error is not None
            and any(start <= c.started and c.finished <= end for start, end in windows)]


def check_journal(workload: ShareWorkload, *, delivery_count_limit: int,
                  lost_counts: dict[int, int] | None = None) -> None:
    """Nothing lost, no committed ACCEPT or REJECT delivered again, the delivery-count limit held:
    no record handed out with a delivery count above the limit, nor delivered more often than the
    limit plus the acquisitions a crash of its partition's leader may have forgotten
    (`lost_counts[partition]`; KIP-932: the acquired state is not persisted)."""
    produced, deliveries, commits = workload.produced, workload.deliveries, workload.commits
    assert not workload.producer_errors, workload.producer_errors[:5]
    assert produced, "the producer wrote records"
    by_record: dict[tuple[int, int], list[Delivery]] = defaultdict(list)
    for delivery in sorted(deliveries, key=lambda d: d.at):
        by_record[(delivery.partition, delivery.offset)].append(delivery)
    unknown = set(by_record) - set(produced)
    assert not unknown, f"delivered but never produced: {sorted(unknown)[:10]}"

    never = sorted(set(produced) - set(by_record))
    assert not never, f"{len(never)} record(s) never delivered, e.g. {never[:10]}"
    settled = workload.settled()
    unsettled = sorted(k for k, index in produced.items() if ack_type_of(index) != RELEASE and k not in settled)
    if unsettled:
        first = unsettled[0]
        story = [c for c in commits if any((d.partition, d.offset) == first for d in c.deliveries)]
        raise AssertionError(f"{len(unsettled)} record(s) never committed, e.g. {unsettled[:10]}; the first was "
                             f"delivered {by_record[first]}, committed {[(c.started, c.error) for c in story]}")

    for commit in commits:
        if commit.error is not None:
            continue
        for delivery in commit.deliveries:
            if ack_type_of(delivery.index) == RELEASE:
                continue
            later = [d for d in by_record[(delivery.partition, delivery.offset)] if d.at > delivery.at]
            assert not later, (f"offset {delivery.offset} of partition {delivery.partition} was delivered again "
                               f"after its {NAMES[ack_type_of(delivery.index)]} was committed: {later}")

    lost_counts = lost_counts or {}
    for (partition, offset), ds in by_record.items():
        assert max(d.delivery_count for d in ds) <= delivery_count_limit, (partition, offset, ds)
        allowed = delivery_count_limit + lost_counts.get(partition, 0)
        assert len(ds) <= allowed, f"offset {offset} of partition {partition} delivered {len(ds)} times: {ds}"
