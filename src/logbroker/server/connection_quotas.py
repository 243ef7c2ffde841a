"""ConnectionQuotas: how many connections the broker holds, in all, per listener and per client
IP, as Kafka's SocketServer counts them (max.connections, listener.name.<l>.max.connections,
max.connections.per.ip, max.connections.per.ip.overrides).

Pure counting, no sockets: server/network.py asks before it accepts and tells when a connection
ends. Invariants: `count(ip)` is the number of connections from `ip` that were accepted and have
not yet closed (for whatever reason), `listener_count(l)` the same per listener, and `total` is
their sum.

Kafka's limits act differently, and so do ours:
- Over the per-IP limit a new connection is closed at once (Kafka's TooManyConnectionsException).
- At max.connections, or at a listener's own max.connections, Kafka's acceptor blocks until a
  connection closes, so new clients wait in the kernel's listen backlog. `accept_blocked` tells
  network.py to stop accepting in the same way. The inter-broker listener is exempt from the
  broker-wide limit, not from its own (Kafka protects it too, so replication never waits behind
  clients).
"""

from __future__ import annotations

import ipaddress
import socket
from collections import Counter
from collections.abc import Mapping

from logbroker.server.config_defs import ConfigError
from logbroker.topic_configs import INT_MAX


def parse_ip_overrides(text: str) -> dict[str, int]:
    """'host:count,host:count' → {ip: count}; host names are resolved once, here, as Kafka's
    InetAddress.getByName does. Raises ConfigError naming the key."""
    overrides: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in (text or "").split(","))):
        host, sep, count = item.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not host or not count.strip().isdigit():
            raise ConfigError(f"Invalid value {text!r} for configuration max.connections.per.ip.overrides: "
                              f"expected host:count pairs separated by commas, got {item!r}")
        try:
            ip = normalize_ip(socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0][4][0])
        except socket.gaierror as exc:
            raise ConfigError(f"Invalid value {text!r} for configuration max.connections.per.ip.overrides: "
                              f"cannot resolve host {host!r} ({exc.strerror})") from None
        overrides[ip] = int(count)
    return overrides


def normalize_ip(ip: str) -> str:
    """One spelling per address: an IPv4-mapped IPv6 address becomes its IPv4 form."""
    try:
        address = ipaddress.ip_address(ip.split("%", 1)[0])
    except ValueError:
        return ip
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


class ConnectionQuotas:
    def __init__(self, *, max_connections: int, max_connections_per_ip: int,
                 per_ip_overrides: Mapping[str, int], listener_limits: Mapping[str, int] | None = None,
                 protected_listener: str | None = None) -> None:
        if max_connections_per_ip == 0 and not per_ip_overrides:
            raise ConfigError("Invalid value 0 for configuration max.connections.per.ip: it can be 0 "
                              "only when max.connections.per.ip.overrides is set")
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.per_ip_overrides = {normalize_ip(ip): n for ip, n in per_ip_overrides.items()}
        self.listener_limits = dict(listener_limits or {})
        self.protected_listener = protected_listener
        self.total = 0
        self._per_ip: Counter[str] = Counter()
        self._per_listener: Counter[str] = Counter()

    @classmethod
    def from_config(cls, config) -> ConnectionQuotas:
        return cls(max_connections=config.max_connections,
                   max_connections_per_ip=config.max_connections_per_ip,
                   per_ip_overrides=parse_ip_overrides(config.max_connections_per_ip_overrides),
                   listener_limits={e.listener_name: config.listener_value(e.listener_name, "max.connections")
                                    for e in config.listeners
                                    if f"listener.name.{e.listener_name.lower()}.max.connections" in config.originals},
                   protected_listener=config.inter_broker_listener_name)

    def adopt_limits(self, other: ConnectionQuotas) -> None:
        """Take `other`'s limits (a dynamic config change), keeping the connections counted here.
        Connections above a lowered limit stay open; new ones wait until the count is below it."""
        self.max_connections = other.max_connections
        self.max_connections_per_ip = other.max_connections_per_ip
        self.per_ip_overrides = dict(other.per_ip_overrides)
        self.listener_limits = dict(other.listener_limits)

    def count(self, ip: str) -> int:
        return self._per_ip[ip]

    def ip_limit(self, ip: str) -> int:
        return self.per_ip_overrides.get(ip, self.max_connections_per_ip)

    def ip_limit_key(self, ip: str) -> str:
        """The config key whose value is `ip`'s limit (for the log line of a refusal)."""
        return "max.connections.per.ip.overrides" if ip in self.per_ip_overrides else "max.connections.per.ip"

    def listener_count(self, listener_name: str) -> int:
        return self._per_listener[listener_name]

    def accept_blocked(self, listener_name: str) -> str | None:
        """What stops `listener_name` accepting until a connection closes, as the key and its
        value ('max.connections (2)'); None when it may accept."""
        own_limit = self.listener_limits.get(listener_name, INT_MAX)
        if self._per_listener[listener_name] >= own_limit:
            return f"listener.name.{listener_name.lower()}.max.connections ({own_limit})"
        if listener_name != self.protected_listener and self.total >= self.max_connections:
            return f"max.connections ({self.max_connections})"
        return None

    def try_inc(self, ip: str, listener_name: str) -> bool:
        """Count a new connection from `ip`; False (and nothing counted) when `ip` is at its limit."""
        if self._per_ip[ip] >= self.ip_limit(ip):
            return False
        self._per_ip[ip] += 1
        self._per_listener[listener_name] += 1
        self.total += 1
        return True

    def dec(self, ip: str, listener_name: str) -> None:
        """A counted connection closed."""
        for counter, key in ((self._per_ip, ip), (self._per_listener, listener_name)):
            counter[key] -= 1
            if counter[key] <= 0:
                del counter[key]
        self.total -= 1
