"""One OffsetDelete (api 47, v0) request to a group's coordinator, for `groups --delete-offsets`.

confluent-kafka's AdminClient has no binding for librdkafka's DeleteConsumerGroupOffsets, so this
is the one request the tools send themselves: a blocking socket, kio's OffsetDelete v0 classes
(Kafka's own message schema), one request and one response. The coordinator comes from
DescribeGroups (confluent-kafka), so this works against any Kafka cluster, as the rest of the tool.
"""

from __future__ import annotations

import io
import socket
import struct
from dataclasses import dataclass

OFFSET_DELETE = 47
CLIENT_ID = "logbroker-groups"
_REQUEST_HEADER = struct.Struct(">hhih")  # api key, version, correlation id, client id length
_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class OffsetDeleteResult:
    """`error_code` is the group-level error; `partition_errors` maps (topic, partition) to the
    partition's error code (0 = deleted)."""

    error_code: int
    partition_errors: dict[tuple[str, int], int]


def encode_request(*, group_id: str, partitions: list[tuple[str, int]],
                   correlation_id: int) -> bytes:
    """The whole frame: size prefix, request header v1, OffsetDelete v0 body."""
    from kio.schema.offset_delete.v0.request import (
        OffsetDeleteRequest,
        OffsetDeleteRequestPartition,
        OffsetDeleteRequestTopic,
    )
    from kio.serial import entity_writer
    from kio.static.primitive import i32

    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    request = OffsetDeleteRequest(group_id=group_id, topics=tuple(
        OffsetDeleteRequestTopic(name=topic, partitions=tuple(
            OffsetDeleteRequestPartition(partition_index=i32(p)) for p in sorted(ps)))
        for topic, ps in sorted(by_topic.items())))
    body = io.BytesIO()
    entity_writer(OffsetDeleteRequest)(body, request)
    client_id = CLIENT_ID.encode()
    header = _REQUEST_HEADER.pack(OFFSET_DELETE, 0, correlation_id, len(client_id)) + client_id
    payload = header + body.getvalue()
    return _SIZE.pack(len(payload)) + payload


def decode_response(frame: bytes, correlation_id: int) -> OffsetDeleteResult:
    """A response frame without its size prefix: header v0 (correlation id), OffsetDelete v0."""
    from kio.schema.offset_delete.v0.response import OffsetDeleteResponse
    from kio.serial import entity_reader

    (got,) = _CORRELATION.unpack_from(frame, 0)
    if got != correlation_id:
        raise ValueError(f"response to correlation id {got}, expected {correlation_id}")
    response, _ = entity_reader(OffsetDeleteResponse)(frame, _CORRELATION.size)
    return OffsetDeleteResult(
        error_code=int(response.error_code),
        partition_errors={(t.name, int(p.partition_index)): int(p.error_code)
                          for t in response.topics for p in t.partitions})


def delete_offsets(host: str, port: int, *, group_id: str, partitions: list[tuple[str, int]],
                   timeout_s: float) -> OffsetDeleteResult:
    """Send OffsetDelete to the coordinator at host:port and wait for its answer. Blocks."""
    correlation_id = 1
    frame = encode_request(group_id=group_id, partitions=partitions, correlation_id=correlation_id)
    with socket.create_connection((host, port), timeout=timeout_s) as connection:
        connection.sendall(frame)
        (size,) = _SIZE.unpack(_read_exactly(connection, _SIZE.size))
        return decode_response(_read_exactly(connection, size), correlation_id)


def _read_exactly(connection: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = connection.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("the coordinator closed the connection")
        chunks += chunk
    return bytes(chunks)
