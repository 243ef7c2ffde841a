"""TLS for SSL and SASL_SSL listeners: the server SSLContext from Kafka's ssl.* keys, and
TlsSession, the TLS state of one connection as a sans-IO object (ssl.MemoryBIO in and out).

Why not `loop.create_server(ssl=…)`: asyncio's TLS transport swallows a failed handshake (a
plaintext client on a TLS port) without telling the protocol, and it hides the raw socket. With
the session in our hands the connection logs one line for a bad handshake, reads the client's
certificate the moment the handshake completes, and writes fetch regions as encrypted chunks it
reads with os.pread — sendfile cannot be used under TLS, the bytes must pass through the cipher.

Keys (Kafka's names; PEM only): ssl.keystore.location (a PEM file holding the private key and the
certificate chain) or ssl.keystore.key + ssl.keystore.certificate.chain (PEM inline),
ssl.key.password (the private key's password), ssl.truststore.location /
ssl.truststore.certificates (CA certificates that client certificates must chain to),
ssl.client.auth (none, requested, required), ssl.enabled.protocols, ssl.cipher.suites. Each may be
given per listener as `listener.name.<listener>.<key>`.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable

from logbroker.server.config_defs import ConfigError

_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3,
              "TLSv1.1": ssl.TLSVersion.TLSv1_1, "TLSv1": ssl.TLSVersion.TLSv1}


def server_ssl_context(get: Callable[[str], object], listener: str) -> ssl.SSLContext:
    """The SSLContext of one listener; `get(key)` returns the listener's value of an ssl.* key.

    Raises ConfigError naming the key when a file is missing or the PEM does not load.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.options |= ssl.OP_NO_RENEGOTIATION
    _limit_protocols(context, get)
    ciphers = get("ssl.cipher.suites")
    if ciphers:
        _set(context.set_ciphers, ":".join(ciphers), "ssl.cipher.suites", listener)
    _load_keystore(context, get, listener)
    client_auth = get("ssl.client.auth")
    if client_auth != "none":
        _load_truststore(context, get, listener)
        context.verify_mode = ssl.CERT_REQUIRED if client_auth == "required" else ssl.CERT_OPTIONAL
    return context


def client_ssl_context(get: Callable[[str], object], listener: str) -> ssl.SSLContext:
    """The SSLContext a broker connects to another broker's `listener` with: the listener's
    truststore checks the peer's certificate and host name (Kafka's default
    ssl.endpoint.identification.algorithm=https), and its keystore, when set, is presented for
    mutual TLS. Raises ConfigError naming the key when the truststore is missing or does not load."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _limit_protocols(context, get)
    if not (get("ssl.truststore.location") or get("ssl.truststore.certificates")):
        raise ConfigError(f"Inter-broker listener {listener} uses TLS but has no "
                          f"ssl.truststore.location to check the other brokers' certificates")
    _load_truststore(context, get, listener)
    if get("ssl.keystore.location") or get("ssl.keystore.key"):
        _load_keystore(context, get, listener)
    return context


def _limit_protocols(context: ssl.SSLContext, get) -> None:
    """ssl.enabled.protocols as the context's minimum and maximum TLS version."""
    enabled = [p for p in (get("ssl.enabled.protocols") or []) if p in _PROTOCOLS]
    if enabled:
        versions = sorted(_PROTOCOLS[p] for p in enabled)
        context.minimum_version, context.maximum_version = versions[0], versions[-1]


def _set(setter, value, key: str, listener: str) -> None:
    try:
        setter(value)
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise ConfigError(f"Invalid value for configuration {key} of listener {listener}: {exc}") from None


def _load_keystore(context: ssl.SSLContext, get, listener: str) -> None:
    password = get("ssl.key.password")
    location = get("ssl.keystore.location")
    chain, key = get("ssl.keystore.certificate.chain"), get("ssl.keystore.key")
    if location:
        if not os.path.isfile(location):
            raise ConfigError(f"Invalid value {location!r} for configuration ssl.keystore.location of "
                              f"listener {listener}: no such file")
        _set(lambda _: context.load_cert_chain(location, password=password), None,
             "ssl.keystore.location", listener)
    elif chain and key:
        # ssl can load a key only from a file: a private temporary file, removed at once.
        import tempfile  # here: only PEM keys given inline need it, and it loads shutil, bz2, lzma

        with tempfile.NamedTemporaryFile("w", suffix=".pem") as pem:
            os.chmod(pem.name, 0o600)
            pem.write(f"{key.strip()}\n{chain.strip()}\n")
            pem.flush()
            _set(lambda _: context.load_cert_chain(pem.name, password=password), None,
                 "ssl.keystore.key", listener)
    else:
        raise ConfigError(f"Listener {listener} uses TLS but has no ssl.keystore.location (or "
                          f"ssl.keystore.key and ssl.keystore.certificate.chain)")


def _load_truststore(context: ssl.SSLContext, get, listener: str) -> None:
    location, inline = get("ssl.truststore.location"), get("ssl.truststore.certificates")
    if location:
        if not os.path.isfile(location):
            raise ConfigError(f"Invalid value {location!r} for configuration "
                              f"ssl.truststore.location of listener {listener}: no such file")
        _set(lambda _: context.load_verify_locations(cafile=location), None,
             "ssl.truststore.location", listener)
    elif inline:
        _set(lambda _: context.load_verify_locations(cadata=inline), None,
             "ssl.truststore.certificates", listener)
    else:
        raise ConfigError(f"ssl.client.auth is {get('ssl.client.auth')} on listener {listener} "
                          f"but there is no ssl.truststore.location to check client certificates")


class TlsError(Exception):
    """The TLS session failed (a bad handshake, a corrupt record); close the connection."""


class TlsSession:
    """The TLS state of one server-side connection. Bytes from the socket go in with `receive`,
    which returns the plaintext they complete; `encrypt` turns plaintext into bytes for the socket;
    `take_output` returns what the session itself has to send (handshake, alerts, tickets).
    Callers must send `take_output()` after every `receive`, before anything else, to keep order.
    """

    __slots__ = ("_in", "_out", "_obj", "handshake_done", "peer_subject")

    def __init__(self, context: ssl.SSLContext) -> None:
        self._in, self._out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self._obj = context.wrap_bio(self._in, self._out, server_side=True)
        self.handshake_done = False
        self.peer_subject: tuple | None = None

    def receive(self, data: bytes) -> bytes:
        self._in.write(data)
        try:
            if not self.handshake_done:
                try:
                    self._obj.do_handshake()
                except ssl.SSLWantReadError:
                    return b""
                self.handshake_done = True
                cert = self._obj.getpeercert()
                self.peer_subject = cert.get("subject") if cert else None
            chunks = []
            while True:
                try:
                    chunk = self._obj.read(262144)
                except ssl.SSLWantReadError:
                    break
                except ssl.SSLZeroReturnError:
                    break
                if not chunk:
                    break
                chunks.append(chunk)
        except ssl.SSLError as exc:
            raise TlsError(exc.reason or str(exc)) from None
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def encrypt(self, data) -> bytes:
        try:
            self._obj.write(data)
        except ssl.SSLError as exc:
            raise TlsError(exc.reason or str(exc)) from None
        return self._out.read()

    def take_output(self) -> bytes:
        return self._out.read() if self._out.pending else b""

    @property
    def version(self) -> str | None:
        return self._obj.version()
