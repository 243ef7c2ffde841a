"""The one outbound Kafka connection: a small asyncio client speaking kio's message classes.

Used by followers (Fetch with their replica id, OffsetForLeaderEpoch) and later by the CLI and
Spark. One request in flight per connection is enough for a follower, so `request()` is a plain
send-then-read under a lock.

A connection kept open between requests goes stale when its peer restarts: the next request on it
reads EOF or a reset. That failure is a StaleConnectionError, and `BrokerConnections.request` sends
a request the caller marks `idempotent` (one that has the same effect sent twice: the share-group
state APIs, a verify-only AddPartitionsToTxn, WriteTxnMarkers) once more on a new connection, to
the broker's address as the metadata gives it now, with one log line. A connection opened for the
request that fails, or a timeout, is not retried here: the peer is down or slow, and the caller
decides. Encoding and decoding are pure functions (`encode_request`,
`decode_response`); only `KafkaConnection` touches a socket.

A ClientSecurity secures the connection as the inter-broker listener demands: TLS (an SSLContext
that checks the peer's certificate and host name, and may present ours for mutual TLS) and SASL
(SaslHandshake v1, then SaslAuthenticate v2 rounds with PLAIN or SCRAM-SHA-256/512), done once
per socket, before the first request. Invariant: no request is sent on a socket that has not
completed the listener's authentication.
"""

from __future__ import annotations

import asyncio
import io
import logging
import ssl
import struct
from dataclasses import dataclass
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from logbroker.errors import KafkaError
from logbroker.protocol import apis

log = logging.getLogger("kafka.clients.NetworkClient")

_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length


class ConnectionClosedError(KafkaError):
    """The peer closed the connection or it could not be opened; reconnect and retry."""


class StaleConnectionError(ConnectionClosedError):
    """A connection that had been open before the request broke under it (EOF, reset): the peer
    restarted or dropped it. A new connection may well succeed."""


class SaslAuthenticationError(ConnectionClosedError):
    """The peer refused our SASL mechanism or credentials; the connection is closed."""


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """How to reach a listener: `ssl_context` for SSL and SASL_SSL, `sasl_mechanism` with
    `username`/`password` for SASL_PLAINTEXT and SASL_SSL. The default is PLAINTEXT."""

    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    username: str = ""
    password: str = ""
    token_auth: bool = False  # SCRAM with a delegation token: username its id, password its HMAC


PLAINTEXT = ClientSecurity()


def client_security(properties: dict[str, str]):
    """logbroker.client's ClientSecurity from client properties (security.protocol, sasl.mechanism,
    sasl.username/sasl.password or sasl.jaas.config (with tokenauth="true" for a delegation token,
    as Kafka's ScramLoginModule takes it), ssl.ca.location or ssl.truststore.location as PEM,
    ssl.endpoint.identification.algorithm)."""
    protocol = properties.get("security.protocol", "PLAINTEXT").upper()
    ssl_context = None
    if protocol in ("SSL", "SASL_SSL"):
        ssl_context = ssl.create_default_context(
            cafile=properties.get("ssl.ca.location") or properties.get("ssl.truststore.location"))
        if properties.get("ssl.endpoint.identification.algorithm", "https") in ("", "none"):
            ssl_context.check_hostname = False
    if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
        return ClientSecurity(protocol, ssl_context)
    username, password = properties.get("sasl.username", ""), properties.get("sasl.password", "")
    jaas = properties.get("sasl.jaas.config")
    token_auth = False
    if jaas and not username:
        from logbroker.security.jaas import parse_jaas
        options = parse_jaas(jaas)[2]
        username, password = options.get("username", ""), options.get("password", "")
        token_auth = options.get("tokenauth", "false").lower() == "true"  # a delegation token
    return ClientSecurity(protocol, ssl_context, properties.get("sasl.mechanism", "GSSAPI").upper(),
                          username, password, token_auth)


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
                 timeout_s: float = 30.0, security: ClientSecurity = PLAINTEXT) -> None:
        self.host, self.port = host, port
        self.security = security
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation_id = 0
        self._lock = asyncio.Lock()

    async def request(self, body: Any) -> Any:
        """Send one request and return its decoded response. Raises ConnectionClosedError
        (StaleConnectionError when a connection opened before broke under it)."""
        return await self._call(self._round_trip, body)

    async def request_frame(self, body: Any) -> bytes:
        """Send one request and return its response frame undecoded (correlation id first), for
        a caller that reads a field kio cannot (DescribeTransactions' -1 start time)."""
        return await self._call(self._exchange, body)

    async def _call(self, exchange, body: Any):
        async with self._lock:
            if self._writer is not None and (self._writer.transport.is_closing() or self._reader.at_eof()):
                self.abort()  # the peer closed it while idle: nothing was sent on it, open anew
            reused = self._writer is not None
            try:
                if not reused:
                    await self._open()
                return await exchange(body)
            except asyncio.TimeoutError as exc:  # before OSError: TimeoutError is one
                await self.close()
                raise ConnectionClosedError(f"connection to {self.host}:{self.port} failed: {exc!r}") from exc
            except (OSError, asyncio.IncompleteReadError) as exc:
                await self.close()
                error = StaleConnectionError if reused else ConnectionClosedError
                raise error(f"connection to {self.host}:{self.port} failed: {exc!r}") from exc
            except ConnectionClosedError:
                await self.close()
                raise

    async def _open(self) -> None:
        security = self.security
        self._reader, self._writer = await asyncio.wait_for(asyncio.open_connection(
            self.host, self.port, ssl=security.ssl_context,
            server_hostname=self.host if security.ssl_context is not None else None), self.timeout_s)
        if security.sasl_mechanism is not None:
            await self._authenticate(security)

    async def _authenticate(self, security: ClientSecurity) -> None:
        """SaslHandshake v1, then SaslAuthenticate v2 until the mechanism is done.

        Their schemas are imported here and in `_sasl_token`, when a connection first
        authenticates: a broker whose inter-broker listener has no SASL never needs them, and
        every broker imports this module (start time)."""
        from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

        mechanism = security.sasl_mechanism
        handshake = await self._round_trip(SaslHandshakeRequest(mechanism=mechanism))
        if handshake.error_code != ErrorCode.none:
            raise SaslAuthenticationError(
                f"{self.host}:{self.port} does not enable SASL mechanism {mechanism} (it offers "
                f"{', '.join(handshake.mechanisms) or 'none'}); check sasl.mechanism.inter.broker.protocol")
        if mechanism == "PLAIN":
            await self._sasl_token(f"\0{security.username}\0{security.password}".encode())
            return
        from logbroker.security.sasl import SaslFailed
        from logbroker.security.scram import ScramSaslClient
        scram = ScramSaslClient(mechanism, security.username, security.password,
                                token_auth=security.token_auth)
        try:
            final = scram.final_message(await self._sasl_token(scram.first_message()))
            scram.verify(await self._sasl_token(final))
        except SaslFailed as exc:
            raise SaslAuthenticationError(f"SASL {mechanism} with {self.host}:{self.port} "
                                          f"failed: {exc}") from None

    async def _sasl_token(self, token: bytes) -> bytes:
        from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest

        response = await self._round_trip(SaslAuthenticateRequest(auth_bytes=token))
        if response.error_code != ErrorCode.none:
            raise SaslAuthenticationError(
                f"{self.host}:{self.port} refused SASL {self.security.sasl_mechanism} as user "
                f"{self.security.username!r}: {response.error_message}")
        return response.auth_bytes

    async def _exchange(self, body: Any) -> bytes:
        self._correlation_id += 1
        self._writer.write(encode_request(body, correlation_id=self._correlation_id,
                                          client_id=self.client_id))
        await self._writer.drain()
        size = _SIZE.unpack(await asyncio.wait_for(self._reader.readexactly(4), self.timeout_s))[0]
        return await asyncio.wait_for(self._reader.readexactly(size), self.timeout_s)

    async def _round_trip(self, body: Any) -> Any:
        frame = await self._exchange(body)
        cls = type(body)
        correlation_id, response = decode_response(frame, api_key=cls.__api_key__,
                                                   api_version=cls.__version__)
        if correlation_id != self._correlation_id:
            raise ConnectionClosedError(f"correlation id {correlation_id} answered, "
                                        f"{self._correlation_id} expected")
        return response

    def abort(self) -> None:
        """Drop the socket at once (the broker moved to another address)."""
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.transport.abort()

    async def close(self) -> None:
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None and self.security.ssl_context is not None:
            # No close_notify exchange: asyncio would wait for the broker's answer to it for up to
            # 30 s, and nothing is pending once a request has been answered or has failed.
            writer.transport.abort()
        elif writer is not None:
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass


class BrokerConnections:
    """One KafkaConnection per broker id, opened on first use: how a broker reaches the others'
    inter-broker listener for its own requests (transaction markers, KIP-890 verification, share
    state). `endpoint(broker_id)` gives (host, port), or None while the broker is unknown; a broker
    that comes back at another address gets a new connection."""

    def __init__(self, *, endpoint, client_id: str, security: ClientSecurity = PLAINTEXT,
                 timeout_ms: int = 30_000) -> None:
        self._endpoint = endpoint
        self._client_id = client_id
        self._security = security
        self._timeout_s = timeout_ms / 1000
        self._connections: dict[int, KafkaConnection] = {}

    def get(self, broker_id: int) -> KafkaConnection | None:
        address = self._endpoint(broker_id)
        if address is None:
            return None
        connection = self._connections.get(broker_id)
        if connection is not None and (connection.host, connection.port) != tuple(address):
            connection.abort()
            connection = None
        if connection is None:
            connection = self._connections[broker_id] = KafkaConnection(
                address[0], address[1], client_id=self._client_id, timeout_s=self._timeout_s,
                security=self._security)
        return connection

    async def request(self, broker_id: int, body: Any, *, idempotent: bool = False) -> Any:
        """Send `body` to broker `broker_id` and return the response. Raises
        ConnectionClosedError, also when the broker's address is unknown. An `idempotent` request
        that broke on a stale connection is sent once more, on a new one."""
        connection = self.get(broker_id)
        if connection is None:
            raise ConnectionClosedError(f"the address of broker {broker_id} is not known")
        try:
            return await connection.request(body)
        except StaleConnectionError as exc:
            if not idempotent:
                raise
            log.info("[%s] The connection to broker %d (%s:%s) broke under %s (%r); sending it again on a "
                     "new connection", self._client_id, broker_id, connection.host, connection.port,
                     type(body).__name__, exc.__cause__ or exc)
        connection = self.get(broker_id)
        if connection is None:
            raise ConnectionClosedError(f"the address of broker {broker_id} is not known")
        return await connection.request(body)

    async def close(self) -> None:
        for connection in self._connections.values():
            await connection.close()
        self._connections.clear()
