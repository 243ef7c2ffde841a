"""Helpers the group API modules share: timeouts in ms and the client's host as Kafka shows it."""

from __future__ import annotations

import datetime


def ms(value) -> int:
    """A kio timedelta field (or a plain int) in milliseconds."""
    if isinstance(value, datetime.timedelta):
        return round(value / datetime.timedelta(milliseconds=1))
    return int(value)


def client_host(request) -> str:
    """The client's address as Kafka's DescribeGroups shows it: '/' + IP."""
    peer = request.connection.peer if request.connection is not None else "?"
    return "/" + peer.rsplit(":", 1)[0] if peer != "?" else ""
