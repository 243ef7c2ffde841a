"""A plain-socket Kafka client for the group APIs, with kio encoding requests and responses."""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from logbroker.protocol import apis
from logbroker.server.responses import build


class Raw:
    def __init__(self, bootstrap: str, *, timeout_s: float = 15.0, client_id: str = "raw") -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self.client_id = client_id.encode()
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Raw:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def send(self, api_key: int, version: int, **fields: Any) -> None:
        self.correlation_id += 1
        body = build(load_request_schema(api_key, version), fields)
        encoded = io.BytesIO()
        entity_writer(type(body))(encoded, body)
        header = struct.pack(">hhih", api_key, version, self.correlation_id, len(self.client_id)) + self.client_id
        flexible = apis.request_header_version(api_key, version) == 2
        payload = header + (b"\x00" if flexible else b"") + encoded.getvalue()
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def receive(self, api_key: int, version: int) -> Any:
        (size,) = struct.unpack(">i", self._read(4))
        data = self._read(size)
        body_at = 4 + (1 if apis.response_header_version(api_key, version) == 1 else 0)
        return entity_reader(load_response_schema(api_key, version))(memoryview(data), body_at)[0]

    def request(self, api_key: int, version: int, **fields: Any) -> Any:
        self.send(api_key, version, **fields)
        return self.receive(api_key, version)

    def _read(self, n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            chunk = self.sock.recv(n - len(chunks))
            if not chunk:
                raise ConnectionError("closed by the broker")
            chunks += chunk
        return bytes(chunks)
