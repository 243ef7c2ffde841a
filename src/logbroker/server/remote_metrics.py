"""Kafka's tiered storage metrics (KIP-405, BrokerTopicMetrics), as the Prometheus JMX exporter
renders them (see server/metrics.py for the naming):

    RemoteCopyBytesPerSec, RemoteCopyRequestsPerSec, RemoteCopyErrorsPerSec, RemoteFetchBytesPerSec,
    RemoteFetchRequestsPerSec, RemoteFetchErrorsPerSec, RemoteDeleteRequestsPerSec,
    RemoteDeleteErrorsPerSec → kafka_server_brokertopicmetrics_remotecopybytes_total, … (all topics)
    RemoteCopyLagBytes, RemoteCopyLagSegments, RemoteLogSizeBytes, RemoteLogMetadataCount
        → kafka_server_brokertopicmetrics_remotecopylagbytes{topic="T"}, … (per topic, summed
          over the partitions this broker leads)

Read at scrape time from the RemoteLogManager's counters and states; event loop only.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

_COUNTERS = (
    ("copy_bytes", "remotecopybytes", "Bytes copied to the remote store (RemoteCopyBytesPerSec)"),
    ("copy_requests", "remotecopyrequests", "Segments copied to the remote store (RemoteCopyRequestsPerSec)"),
    ("copy_errors", "remotecopyerrors", "Failed segment copies (RemoteCopyErrorsPerSec)"),
    ("fetch_bytes", "remotefetchbytes", "Bytes read from the remote store for fetches (RemoteFetchBytesPerSec)"),
    ("fetch_requests", "remotefetchrequests", "Fetches served from the remote store (RemoteFetchRequestsPerSec)"),
    ("fetch_errors", "remotefetcherrors", "Failed remote reads (RemoteFetchErrorsPerSec)"),
    ("delete_requests", "remotedeleterequests", "Remote segments deleted (RemoteDeleteRequestsPerSec)"),
    ("delete_errors", "remotedeleteerrors", "Failed remote segment deletions (RemoteDeleteErrorsPerSec)"),
)


def remote_storage_families(rlm, partitions: list) -> Iterable[Metric]:
    """The families, none when tiered storage is off (`rlm` None)."""
    if rlm is None:
        return
    for attribute, short, documentation in _COUNTERS:
        family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{short}", documentation)
        family.add_metric([], getattr(rlm, attribute))
        yield family
    gauges = {short: GaugeMetricFamily(f"kafka_server_brokertopicmetrics_{short}", documentation, labels=["topic"])
              for short, documentation in (
                  ("remotecopylagbytes", "Bytes of closed segments not yet copied (RemoteCopyLagBytes)"),
                  ("remotecopylagsegments", "Closed segments not yet copied (RemoteCopyLagSegments)"),
                  ("remotelogsizebytes", "Bytes in the remote store (RemoteLogSizeBytes)"),
                  ("remotelogmetadatacount", "Remote segments (RemoteLogMetadataCount)"))}
    totals: dict[str, list[int]] = {}
    for p in partitions:
        state = rlm.states.get(p.tp)
        if state is None or not p.is_leader:
            continue
        lag_bytes, lag_segments = rlm.copy_lag(p.tp, p.log)
        sums = totals.setdefault(p.tp.topic, [0, 0, 0, 0])
        for i, value in enumerate((lag_bytes, lag_segments, state.size_in_bytes, len(state.segments))):
            sums[i] += value
    for topic, sums in sorted(totals.items()):
        for family, value in zip(gauges.values(), sums):
            family.add_metric([topic], value)
    yield from gauges.values()
