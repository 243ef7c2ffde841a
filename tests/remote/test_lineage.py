"""Which remote segments belong to the leader's epoch lineage (remote/lineage.py), case by case as
Kafka's RemoteLogManagerTest checks isRemoteSegmentWithinLeaderEpochs."""

from __future__ import annotations

import pytest

from logbroker.remote.lineage import before_lineage, covers, filtered, within_lineage, wholly_within
from logbroker.remote.metadata import RemoteLogSegmentMetadata


def segment(start: int, end: int, epochs: dict[int, int]) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(topic="t", partition=0, topic_id="AAAAAAAAAAAAAAAAAAAAAA",
                                    segment_id=f"s{start}-{end}", start_offset=start, end_offset=end,
                                    max_timestamp_ms=0, broker_id=1, event_timestamp_ms=0,
                                    segment_size_in_bytes=1, segment_leader_epochs=epochs)


# Epoch 2 was elected at 250 and wrote nothing before epoch 3 took over at 250.
LINEAGE = filtered({0: 0, 1: 100, 2: 250, 3: 250})
LOG_END = 400


@pytest.mark.parametrize(("start", "end", "epochs", "expected"), [
    (0, 99, {0: 0}, True),                          # one whole epoch
    (50, 149, {0: 50, 1: 100}, True),               # begins mid-epoch, crosses into the next
    (100, 299, {1: 100, 2: 250, 3: 250}, True),     # holds the empty epoch too
    (250, 399, {3: 250}, True),                     # ends right before the log end
    (250, 400, {3: 250}, False),                    # reaches the log end offset
    (0, 120, {0: 0}, False),                        # epoch 0 ends at 99 in the lineage
    (50, 149, {0: 50, 1: 120}, False),              # epoch 1 starts elsewhere: diverged
    (100, 199, {1: 100, 2: 150}, False),            # epoch 2 wrote records the lineage lacks
    (300, 350, {4: 300}, False),                    # an epoch newer than the leader's
    (90, 260, {1: 90, 3: 250}, False),              # epoch 1 before its start in the lineage
    (260, 300, {}, False),                          # no epochs at all
])
def test_within_lineage(start, end, epochs, expected):
    assert within_lineage(segment(start, end, epochs), LOG_END, LINEAGE) is expected


def test_a_lineage_trimmed_at_the_log_start_still_holds_an_overlapping_copy():
    """Kafka's example: the cache was trimmed at 150 after an older copy expired; a copy made
    by another leader starting earlier, in an epoch now before the lineage, is still valid."""
    trimmed = filtered({1: 150, 3: 250})
    assert within_lineage(segment(50, 199, {0: 50, 1: 100}), LOG_END, trimmed)
    assert not within_lineage(segment(50, 260, {0: 50, 1: 100}), LOG_END, trimmed)


@pytest.mark.parametrize(("epochs", "expected"), [
    ({0: 0, 1: 100}, True),      # all before epoch 3, the lineage's first
    ({1: 100, 3: 250}, False),   # also holds records of the lineage
    ({}, False),
])
def test_before_lineage(epochs, expected):
    assert before_lineage(segment(0, 260, epochs), {3: 250, 5: 300}) is expected


def test_filtered_drops_epochs_without_records():
    assert filtered({0: 0, 1: 10, 2: 10, 3: 20}) == {0: 0, 2: 10, 3: 20}
    assert filtered({}) == {}


@pytest.mark.parametrize(("lineage", "log_start", "expected"), [
    ({0: 0, 3: 500}, 0, True),
    ({3: 500}, 500, True),
    ({3: 500}, 400, False),   # a log restarted at 500 from the store: older epochs unknown
    ({}, 0, False),
])
def test_covers(lineage, log_start, expected):
    assert covers(lineage, log_start) is expected


def test_wholly_within():
    assert wholly_within(segment(100, 199, {}), segment(50, 250, {}))
    assert wholly_within(segment(100, 199, {}), segment(100, 199, {}))
    assert not wholly_within(segment(40, 199, {}), segment(50, 250, {}))
