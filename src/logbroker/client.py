"""The one outbound Kafka connection: a small asyncio client speaking kio's message classes.

Used by followers (Fetch with their replica id, OffsetForLeaderEpoch) and later by the CLI and
Spark. One request in flight per connection is enough for a follower, so `request()` is a plain
send-then-read under a lock. Encoding and decoding are pure functions (`encode_request`,
`decode_response`); only `KafkaConnection` touches a socket.
"""

from __future__ import annotations

import asyncio
import io
import struct
from typing import Any

from kio.index import load_response_schema
from kio.serial import entity_reader, entity_writer

from logbroker.errors import KafkaError
from logbroker.protocol import apis

_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length


class ConnectionClosedError(KafkaError):
    """The peer closed the connection or it could not be opened; reconnect and retry."""


def encode_request(body: Any, *, correlation_id: int, client_id: str) -> bytes:
    """A whole request frame: size prefix, request header (v1 or v2), then `body` (kio)."""
    cls = type(body)
    api_key, version = cls.__api_key__, cls.__version__
    client = client_id.encode()
    header = _HEADER.pack(api_key, version, correlation_id, len(client)) + client
    if apis.request_header_version(api_key, version) >= 2:
        header += b"\x00"  # no tagged fields
    buffer = io.BytesIO()
    entity_writer(cls)(buffer, body)
    data = header + buffer.getvalue()
    return _SIZE.pack(len(data)) + data


def decode_response(frame: bytes, *, api_key: int, api_version: int) -> tuple[int, Any]:
    """(correlation id, kio response) from a frame without its size prefix."""
    correlation_id = _SIZE.unpack_from(frame)[0]
    offset = 4
    if apis.response_header_version(api_key, api_version) >= 1:
        offset += 1  # tagged fields: a broker sends none in a response header
    reader = entity_reader(load_response_schema(api_key, api_version))
    body, _ = reader(frame, offset)
    return correlation_id, body


class KafkaConnection:
    def __init__(self, host: str, port: int, *, client_id: str = "logbroker",
                 timeout_s: float = 30.0) -> None:
        self.host, self.port = host, port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation_id = 0
        self._lock = asyncio.Lock()

    async def request(self, body: Any) -> Any:
        """Send one request and return its decoded response. Raises ConnectionClosedError."""
        async with self._lock:
            try:
                if self._writer is None:
                    self._reader, self._writer = await asyncio.wait_for(
                        asyncio.open_connection(self.host, self.port), self.timeout_s)
                self._correlation_id += 1
                self._writer.write(encode_request(body, correlation_id=self._correlation_id,
                                                  client_id=self.client_id))
                await self._writer.drain()
                size = _SIZE.unpack(await asyncio.wait_for(self._reader.readexactly(4), self.timeout_s))[0]
                frame = await asyncio.wait_for(self._reader.readexactly(size), self.timeout_s)
            except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError) as exc:
                await self.close()
                raise ConnectionClosedError(f"connection to {self.host}:{self.port} failed: {exc!r}") from exc
            cls = type(body)
            correlation_id, response = decode_response(frame, api_key=cls.__api_key__,
                                                       api_version=cls.__version__)
            if correlation_id != self._correlation_id:
                await self.close()
                raise ConnectionClosedError(f"correlation id {correlation_id} answered, "
                                            f"{self._correlation_id} expected")
            return response

    async def close(self) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass
