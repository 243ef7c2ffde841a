"""Reads from the remote store for a `RemoteLogManager`: fetches and timestamp lookups.

`RemoteLogReads` is a part of RemoteLogManager (remote_log_manager.py), mixed into it; it works on
the manager's states, store, caches and counters. A fetch below the local log start is served from
the remote segment holding its offset: the segment's offset index (cached) gives the position to
read from, the .log is read in ranges of at least READ_AHEAD_BYTES (the latest range of each
segment kept, so a sequential replay reads each byte from the store once), and whole batches are
returned (remote_read.py). Under read_committed the aborted transactions come from the .txnindex
of that segment and every later one (an ABORT marker may be segments after the data), then from
the local log's.

A read that fails in the store, or finds an object shorter than its metadata says or bytes that
are no batch where the index points, fails that partition of the fetch alone with Kafka's answer
to a RemoteStorageException, UNKNOWN_SERVER_ERROR (the client retries after its backoff), counts
in RemoteFetchErrors and logs one line (rate-limited); it never returns what it did read of a
corrupt segment.

Threads: event loop only; the store is awaited.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from logbroker.errors import KafkaError, NotLeaderOrFollowerError, OffsetNotAvailableError, OffsetOutOfRangeError
from logbroker.log_limits import RateLimitedLog
from logbroker.records.batch import read_header
from logbroker.remote.metadata import OFFSET_INDEX, TIME_INDEX, TRANSACTION_INDEX, RemoteLogSegmentMetadata
from logbroker.remote.remote_partition import RemotePartitionState
from logbroker.remote.remote_read import (
    HEADER_SIZE,
    CorruptRemoteBatchError,
    PendingRemoteRead,
    batch_size_at,
    index_position,
    select_batches,
    time_index_offset,
)
from logbroker.remote.storage_manager import RemoteStorageError, RemoteStorageManager
from logbroker.storage.file_records import first_record_at_or_after
from logbroker.storage.transaction_index import decode_aborted_txns
from logbroker.storage.values import TimestampAndOffset
from logbroker.types import TopicPartition

log = logging.getLogger("kafka.log.remote.RemoteLogManager")
_read_log = RateLimitedLog(log, burst=5, interval_s=60.0)

# A remote read fetches at least READ_AHEAD_BYTES (one ranged GET) and keeps the latest range of
# CHUNK_CACHE_ENTRIES segments: a sequential replay costs 256 GETs a GB and at most 64 MiB here.
READ_AHEAD_BYTES = 4 << 20
INDEX_CACHE_ENTRIES = 1024
CHUNK_CACHE_ENTRIES = 16


class RemoteLogReads:
    """The reading methods of RemoteLogManager. See the module docstring."""

    # The manager's state these methods work on (set in RemoteLogManager.__init__).
    rsm: RemoteStorageManager
    partitions: dict
    states: dict[TopicPartition, RemotePartitionState]
    fetch_max_wait_ms: int
    fetch_bytes: int
    fetch_requests: int
    fetch_errors: int
    fetch_timeouts: int
    _indexes: OrderedDict
    _chunks: OrderedDict
    _ensure_loaded: Callable[[TopicPartition], Awaitable[None]]
    log_start_offset: Callable[[TopicPartition, object], int]

    def awaits_listing(self, tp: TopicPartition) -> bool:
        """Whether the store's listing of tiered `tp` is still to come (a leader just elected, or
        a store that failed to list): offsets drawn from it (ListOffsets -2, -5) wait for it."""
        state = self.states.get(tp)
        return state is not None and not state.loaded

    async def listed(self, tp: TopicPartition) -> None:
        """List `tp`'s remote segments if not yet done. OffsetNotAvailableError (retriable: the
        client asks again) when the store cannot be listed, rather than an answer that skips
        the remote history."""
        try:
            await self._ensure_loaded(tp)
        except KafkaError as exc:
            raise OffsetNotAvailableError(f"The remote segments of {tp} cannot be listed yet: {exc}") from exc
        if self.awaits_listing(tp):
            raise OffsetNotAvailableError(f"The remote segments of {tp} are not listed yet")

    def serves(self, tp: TopicPartition, log_, fetch_offset: int) -> bool:
        """Whether a fetch at `fetch_offset` is for the store: below the local log start and at
        or above the log start offset."""
        state = self.states.get(tp)
        if state is None or fetch_offset >= log_.log_start_offset:
            return False
        if not state.loaded:
            return True  # `read` waits for the store's listing (a leader just elected)
        earliest = state.earliest_offset()
        return earliest is not None and fetch_offset >= earliest

    async def read(self, tp: TopicPartition, log_, fetch_offset: int, *, max_bytes: int,
                   min_one_message: bool, read_committed: bool) -> tuple[bytes, tuple | None]:
        """The whole batches from the one holding `fetch_offset`, at most `max_bytes` (the first
        whole with `min_one_message`), from the remote segment holding it; and under
        read_committed the aborted transactions overlapping them, (producer id, first offset).
        RemoteStorageError (counted) when the store or what it holds fails the read."""
        try:
            return await self._read(tp, log_, fetch_offset, max_bytes=max_bytes,
                                    min_one_message=min_one_message, read_committed=read_committed)
        except RemoteStorageError as exc:  # counted and logged here, even when its fetch has timed out
            self.fetch_errors += 1
            _read_log.log(logging.ERROR, type(exc).__name__, "Remote read of %s at offset %d failed: %s: %s",
                          tp, fetch_offset, exc.name, exc)
            raise

    async def _read(self, tp: TopicPartition, log_, fetch_offset: int, *, max_bytes: int,
                    min_one_message: bool, read_committed: bool) -> tuple[bytes, tuple | None]:
        state = self.states.get(tp)
        if state is not None and not state.loaded:
            await self._ensure_loaded(tp)
        earliest = state.earliest_offset() if state is not None else None
        segment = state.segment_for(fetch_offset) if earliest is not None and fetch_offset >= earliest else None
        if segment is None:
            raise OffsetOutOfRangeError(
                f"Received request for offset {fetch_offset} for partition {tp}, but the log "
                f"starts at offset {self.log_start_offset(tp, log_)}")
        fetch_offset = max(fetch_offset, segment.start_offset)
        self.fetch_requests += 1
        index = await self._index(segment, OFFSET_INDEX)
        position = index_position(index, segment.start_offset, fetch_offset)
        try:
            data = await self._records(segment, position, fetch_offset, max_bytes, min_one_message)
        except CorruptRemoteBatchError as exc:
            raise RemoteStorageError(f"Remote segment {segment.key('.log')} is corrupt: {exc}") from exc
        self.fetch_bytes += len(data)
        if not read_committed:
            return data, None
        if not data:
            return data, ()
        upper = _next_offset_after(data)
        # Kafka's collectAbortedTransactions: an abort's entry is in the segment of its marker,
        # which may be any later one; walk on (remote, then local) until an entry's last stable
        # offset reaches `upper`, past which no transaction overlapping the records was open.
        aborted, complete = [], False
        for later in state.segments_after(segment):
            if later.has_txn_index:
                for txn in decode_aborted_txns(await self._index(later, TRANSACTION_INDEX)):
                    if txn.last_offset >= fetch_offset and txn.first_offset < upper:
                        aborted.append(txn)
                    complete = complete or txn.last_stable_offset >= upper
            if complete:
                break
        if not complete:
            aborted.extend(log_.collect_aborted_transactions(fetch_offset, upper))
        seen = {}
        for txn in aborted:
            seen[(txn.producer_id, txn.first_offset)] = None
        return data, tuple(seen)

    async def complete_reads(self, results: dict) -> dict:
        """Fetch results with their PendingRemoteRead records read from the store, concurrently,
        each answered within remote.fetch.max.wait.ms (else with no records this time)."""
        pending = {tp: r for tp, r in results.items() if type(r.records) is PendingRemoteRead}

        async def one(tp: TopicPartition, result):
            read = result.records
            partition = self.partitions.get(tp)
            if partition is None:
                return result._replace(error=NotLeaderOrFollowerError(f"This server no longer leads {tp}"),
                                       records=None)
            task = asyncio.get_running_loop().create_task(self.read(
                tp, partition.log, read.fetch_offset, max_bytes=read.size,
                min_one_message=read.min_one_message, read_committed=read.read_committed))
            done, _ = await asyncio.wait({task}, timeout=self.fetch_max_wait_ms / 1000)
            if not done:
                # Kafka's DelayedRemoteFetch on expiry: nothing for this partition this time. The
                # read goes on (what it loads and caches serves the client's next fetch).
                self.fetch_timeouts += 1
                task.add_done_callback(_consume_result)
                return result._replace(records=None, aborted_transactions=() if read.read_committed else None)
            try:
                data, aborted = task.result()
            except KafkaError as exc:
                if not isinstance(exc, RemoteStorageError):  # that one is logged by `read`
                    _read_log.log(logging.WARNING, type(exc).__name__, "Remote read of %s at offset %d "
                                  "failed: %s: %s", tp, read.fetch_offset, exc.name, exc)
                return result._replace(error=exc, records=None)
            return result._replace(records=data or None, aborted_transactions=aborted)

        if not pending:
            return results
        done = await asyncio.gather(*(one(tp, r) for tp, r in pending.items()))
        merged = dict(results)
        merged.update(zip(pending, done))
        return merged

    async def _records(self, segment: RemoteLogSegmentMetadata, position: int, fetch_offset: int,
                       max_bytes: int, min_one_message: bool) -> bytes:
        if position >= segment.segment_size_in_bytes:
            raise CorruptRemoteBatchError(f"its offset index points at position {position}, past its "
                                          f"{segment.segment_size_in_bytes} bytes")
        window = max(max_bytes, READ_AHEAD_BYTES)
        first = True
        while position < segment.segment_size_in_bytes:
            chunk = await self._chunk(segment, position, window)
            if first and len(chunk) >= HEADER_SIZE:  # where the index points, a batch of this segment
                header = read_header(chunk, 0)
                if header.magic != 2 or not segment.start_offset <= header.base_offset <= segment.end_offset:
                    raise CorruptRemoteBatchError(f"no record batch of offsets {segment.start_offset}-"
                                                  f"{segment.end_offset} at position {position}")
                first = False
            start, end, needed = select_batches(chunk, fetch_offset=fetch_offset, max_bytes=max_bytes,
                                                min_one_message=min_one_message)
            if needed is not None:
                return await self.rsm.fetch_log_segment(segment, position + start, position + start + needed)
            if end > start or position + len(chunk) >= segment.segment_size_in_bytes:
                return chunk[start:end]
            position += start  # the batch to start from did not fit the chunk: read from it
            window = max(window, 2 * len(chunk))
        return b""

    async def _chunk(self, segment: RemoteLogSegmentMetadata, position: int, window: int) -> bytes:
        """Bytes of the .log from `position`, at least `window` of them where the segment has
        them, from the read-ahead cache when it holds them."""
        cached = self._chunks.get(segment.segment_id)
        if cached is not None:
            start, data = cached
            if start <= position and (position + window <= start + len(data)
                                      or start + len(data) >= segment.segment_size_in_bytes) \
                    and position < start + len(data):
                self._chunks.move_to_end(segment.segment_id)
                return data[position - start:]
        data = await self.rsm.fetch_log_segment(segment, position, position + window)
        self._chunks[segment.segment_id] = (position, data)
        if len(self._chunks) > CHUNK_CACHE_ENTRIES:
            self._chunks.popitem(last=False)
        return data

    async def _index(self, segment: RemoteLogSegmentMetadata, suffix: str) -> bytes:
        key = (segment.segment_id, suffix)
        data = self._indexes.get(key)
        if data is None:
            data = await self.rsm.fetch_file(segment, suffix)
            self._indexes[key] = data
            if len(self._indexes) > INDEX_CACHE_ENTRIES:
                self._indexes.popitem(last=False)
        else:
            self._indexes.move_to_end(key)
        return data

    # --- timestamps -------------------------------------------------------------------------------

    def may_hold_timestamp(self, tp: TopicPartition, log_, timestamp: int) -> bool:
        """Whether ListOffsets for `timestamp` must look in the store: a remote segment below the
        local log start reaches it (or the store is not listed yet)."""
        state = self.states.get(tp)
        if state is None:
            return False
        if not state.loaded:
            return True
        return any(s.max_timestamp_ms >= timestamp and s.start_offset < log_.log_start_offset
                   for s in state.segments)

    async def find_offset_by_timestamp(self, tp: TopicPartition, log_, timestamp: int):
        """The first record in the remote segments, at or after the log start offset, whose
        timestamp is at least `timestamp` (a TimestampAndOffset), or None. Reads each candidate
        segment's time and offset indexes, then its batches from there; decodes one batch."""
        state = self.states.get(tp)
        if state is not None and not state.loaded:
            await self._ensure_loaded(tp)
        earliest = state.earliest_offset() if state is not None else None
        if earliest is None:
            return None
        for segment in list(state.segments):
            if segment.end_offset < earliest or segment.max_timestamp_ms < timestamp:
                continue
            start_offset = max(earliest, segment.start_offset,
                               time_index_offset(await self._index(segment, TIME_INDEX),
                                                 segment.start_offset, timestamp))
            position = index_position(await self._index(segment, OFFSET_INDEX), segment.start_offset,
                                      start_offset)
            found = await self._search_batches(segment, position, timestamp, start_offset)
            if found is not None:
                return found
        return None

    async def _search_batches(self, segment: RemoteLogSegmentMetadata, position: int, timestamp: int,
                              start_offset: int):
        while position < segment.segment_size_in_bytes:
            chunk = await self._chunk(segment, position, READ_AHEAD_BYTES)
            at = 0
            while (size := batch_size_at(chunk, at)) is not None and at + size <= len(chunk):
                header = read_header(chunk, at)
                if header.max_timestamp >= timestamp and header.last_offset >= start_offset:
                    found = first_record_at_or_after(header, memoryview(chunk)[at:at + size], timestamp,
                                                     start_offset)
                    if found is not None:
                        epoch = header.partition_leader_epoch
                        return TimestampAndOffset(found[0], found[1], epoch if epoch >= 0 else -1)
                at += size
            if at == 0:  # a batch larger than the chunk: read exactly it
                size = batch_size_at(chunk, 0)
                if size is None:
                    return None
                chunk = await self.rsm.fetch_log_segment(segment, position, position + size)
                self._chunks[segment.segment_id] = (position, chunk)
                continue
            position += at
        return None


def _consume_result(task: asyncio.Task) -> None:
    """A remote read no fetch waits for any more: its error is not worth a traceback."""
    if not task.cancelled() and task.exception() is not None:
        log.debug("Remote read finished after its fetch: %r", task.exception())


def _next_offset_after(data: bytes) -> int:
    """The offset after the last batch in `data` (whole batches)."""
    position, last = 0, -1
    while position < len(data):
        header = read_header(data, position)
        last = header.last_offset
        position += header.size_in_bytes
    return last + 1
