"""What the cleaner knows of transactions while it walks a log (Kafka's CleanedTransactionMetadata).

The cleaner only cleans below the first unstable offset, so every transaction it meets is
decided: aborted ones are listed in the .txnindex files (`Log.collect_aborted_transactions`),
every other transactional batch belongs to a committed one. Walking the batches in offset order:

- a data batch of an aborted transaction may be discarded (its records are never needed again);
  the offset map skips its keys, so it cannot shadow an older committed value;
- an ABORT marker is kept, and its AbortedTxn copied into the cleaned segment's .txnindex, as long
  as this walk saw data of that transaction (a consumer may still meet those records in an
  uncleaned copy: followers, or a fetch that started before the swap); once a cleaning finds no
  data left before it, the marker may go;
- a COMMIT marker may go once no data of its transaction was seen before it;
- a marker that may go is not dropped at once: the cleaner first stamps it with a delete horizon
  (now + delete.retention.ms) and drops it in a cleaning after that time — Kafka's two-phase
  removal, so a consumer that read the data just before still sees the marker.

Not thread-safe; one instance per cleaning round (and one for the offset map's pass).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from logbroker.records.batch import BatchHeader
from logbroker.records.control import EndTransactionMarker
from logbroker.storage.transaction_index import AbortedTxn, TransactionIndex


@dataclass(slots=True)
class _AbortedTxnSeen:
    txn: AbortedTxn
    last_observed_batch_offset: int = -1  # -1: no data of it seen in this walk


class CleanedTransactionMetadata:
    def __init__(self) -> None:
        self._ongoing_committed: set[int] = set()  # producer ids
        self._ongoing_aborted: dict[int, _AbortedTxnSeen] = {}
        self._aborted_heap: list[tuple[int, int, AbortedTxn]] = []  # by first offset
        self._seq = 0
        # The cleaned segment's index, where kept ABORT markers' entries go (set per group).
        self.cleaned_index: TransactionIndex | None = None

    def add_aborted_transactions(self, aborted: list[AbortedTxn]) -> None:
        for txn in aborted:
            heapq.heappush(self._aborted_heap, (txn.first_offset, self._seq, txn))
            self._seq += 1

    def _consume_aborted_up_to(self, offset: int) -> None:
        heap = self._aborted_heap
        while heap and heap[0][0] <= offset:
            txn = heapq.heappop(heap)[2]
            self._ongoing_aborted.setdefault(txn.producer_id, _AbortedTxnSeen(txn))

    def on_control_batch_read(self, header: BatchHeader, marker: EndTransactionMarker | None) -> bool:
        """A control batch: whether it may be discarded (see the module docstring). An empty
        control batch (left by an earlier cleaning) may; a non-marker control record may not."""
        self._consume_aborted_up_to(header.last_offset)
        if header.records_count == 0:
            return True
        if marker is None:
            return False
        producer_id = header.producer_id
        if not marker.is_commit:
            seen = self._ongoing_aborted.pop(producer_id, None)
            if seen is not None and seen.last_observed_batch_offset >= 0:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(seen.txn)
                return False
            return True
        if producer_id in self._ongoing_committed:
            self._ongoing_committed.discard(producer_id)
            return False
        return True

    def on_batch_read(self, header: BatchHeader) -> bool:
        """A data batch: True when it belongs to an aborted transaction (discard it)."""
        self._consume_aborted_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        seen = self._ongoing_aborted.get(header.producer_id)
        if seen is not None:
            seen.last_observed_batch_offset = header.last_offset
            return True
        self._ongoing_committed.add(header.producer_id)
        return False
