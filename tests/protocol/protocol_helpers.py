"""Test helpers: kio as the reference encoder, and builders of kio objects from plain values."""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
import types
import typing
from functools import cache
from typing import Any

from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.static.primitive import Records, TZAware, i32Timedelta, i64Timedelta

st.register_type_strategy(Records, st.binary(max_size=64))


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _unwrap_optional(tp: Any) -> Any:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        assert len(args) == 1, tp
        return args[0]
    return tp


def kio_build(cls: type, values: dict[str, Any]) -> Any:
    """Build a kio entity from plain values: nested dicts/lists become nested entities, int ms
    become timedeltas or datetimes (-1 = None), ints become ErrorCodes. Keys the class lacks are
    ignored (so one dict serves every version); fields absent from `values` take kio's default."""
    hints = _hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in values:
            kwargs[f.name] = _convert(hints[f.name], values[f.name])
    return cls(**kwargs)


def _convert(tp: Any, value: Any) -> Any:
    optional = typing.get_origin(tp) in (typing.Union, types.UnionType)
    inner = _unwrap_optional(tp)
    if inner is TZAware:
        if value == -1 and optional:
            return None
        return datetime.datetime.fromtimestamp(value / 1000, tz=datetime.timezone.utc)
    if value is None:
        return None
    if typing.get_origin(inner) is tuple:
        (element, _) = typing.get_args(inner)
        return tuple(_convert(element, v) for v in value)
    if dataclasses.is_dataclass(inner):
        return kio_build(inner, value)
    if inner is ErrorCode:
        return ErrorCode(value)
    if inner in (i32Timedelta, i64Timedelta, datetime.timedelta):
        return datetime.timedelta(milliseconds=value)
    if inner is Records:
        return bytes(value)
    return value


def kio_body_bytes(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def kio_response_frame(entity: Any, correlation_id: int) -> bytes:
    """The reference encoding of a whole response frame: kio's body behind the header that
    kio's generated class names (`__header_schema__`: v0, or v1 with its empty tag section)."""
    body = kio_body_bytes(entity)
    header = struct.pack(">i", correlation_id)
    if entity.__header_schema__.__version__ == 1:
        header += b"\x00"
    return struct.pack(">i", len(header) + len(body)) + header + body


def kio_request_frame(entity: Any, correlation_id: int, client_id: str | None = "test-client") -> bytes:
    """A request frame body (no size prefix) as kio writes it, header included."""
    header_cls = entity.__header_schema__
    header_fields = {f.name for f in dataclasses.fields(header_cls)}
    kwargs = {"request_api_key": entity.__api_key__, "request_api_version": entity.__version__,
              "correlation_id": correlation_id}
    if "client_id" in header_fields:
        kwargs["client_id"] = client_id
    return kio_body_bytes(header_cls(**kwargs)) + kio_body_bytes(entity)


class FakeRecords:
    """Stands in for a storage file region: has `.size` (and, for the test, the bytes)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.size = len(data)

    def __repr__(self) -> str:
        return f"FakeRecords({self.size} bytes)"


def join_chunks(chunks: list[Any]) -> bytes:
    return b"".join(c.data if isinstance(c, FakeRecords) else bytes(c) for c in chunks)


error_codes = st.sampled_from([e.value for e in ErrorCode])


def as_hand_decoded_produce(body: Any) -> Any:
    """A kio ProduceRequest in the shape the hand-written decoder gives (protocol/requests/
    produce.py), for comparing the two: records compare equal whether bytes or a view."""
    from logbroker.protocol.requests.produce import PartitionProduceData, ProduceRequest, TopicProduceData

    return ProduceRequest(
        body.transactional_id, body.acks, int(body.timeout.total_seconds() * 1000),
        tuple(TopicProduceData(t.name, tuple(PartitionProduceData(p.index, p.records)
                                             for p in t.partition_data))
              for t in body.topic_data))
