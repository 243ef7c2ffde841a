"""Sending writes to the registry on the leader of `_schemas`, as Confluent's followers forward
them: the request as received (method, raw path and query, JSON body, Authorization header), and
the leader's answer returned as it came.

Where each broker's registry listens is published in ZooKeeper, in an ephemeral znode per broker
(`/logbroker/schema_registry/<broker id>`, JSON `{"version":1,"url":"http://host:port"}`), written
when the registry starts serving and gone with the broker's session.
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.error
import urllib.request

from logbroker.schema_registry import errors

log = logging.getLogger("io.confluent.kafka.schemaregistry.rest.RestService")

ZNODE_ROOT = "/logbroker/schema_registry"
FORWARD_TIMEOUT_S = 35.0


def publish_url(zk_client, broker_id: int, url: str) -> None:
    """Blocks on ZooKeeper: this broker's registry URL, ephemeral."""
    from kazoo.exceptions import NodeExistsError
    path = f"{ZNODE_ROOT}/{broker_id}"
    data = json.dumps({"version": 1, "url": url}).encode()
    try:
        zk_client.create(path, data, ephemeral=True, makepath=True)
    except NodeExistsError:
        zk_client.set(path, data)


class LeaderForwarder:
    """`leader_id()` is the broker leading `_schemas` partition 0 (None: no leader now)."""

    def __init__(self, zk_client, leader_id, ssl_context=None) -> None:
        self.zk_client = zk_client
        self.leader_id = leader_id
        self.ssl_context = ssl_context  # checks the leader's certificate on https (None: system CAs)

    def leader_url(self) -> str:
        """Blocks on ZooKeeper: the registry URL of the leader; 50004 when there is none."""
        from kazoo.exceptions import NoNodeError
        leader = self.leader_id()
        if leader is None:
            raise errors.UnknownLeader("The _schemas topic has no leader at the moment; retry")
        try:
            data, _ = self.zk_client.get(f"{ZNODE_ROOT}/{leader}")
            return json.loads(data)["url"]
        except (NoNodeError, ValueError, KeyError):
            raise errors.UnknownLeader(f"Broker {leader} leads _schemas but serves no registry") from None

    async def forward(self, method: str, path_and_query: str, body: bytes | None,
                      authorization: str | None) -> tuple[int, bytes]:
        return await asyncio.get_running_loop().run_in_executor(
            None, self._forward, method, path_and_query, body, authorization)

    def _forward(self, method: str, path_and_query: str, body: bytes | None,
                 authorization: str | None) -> tuple[int, bytes]:
        from logbroker.schema_registry.app import CONTENT_TYPE, FORWARDED_HEADER
        url = self.leader_url()
        headers = {"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE, FORWARDED_HEADER: "true"}
        if authorization:
            headers["Authorization"] = authorization
        request = urllib.request.Request(url.rstrip("/") + path_and_query, data=body, method=method,
                                         headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=FORWARD_TIMEOUT_S, context=self.ssl_context) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()
        except (OSError, urllib.error.URLError) as exc:
            log.warning("Forwarding %s %s to the leader at %s failed: %s", method, path_and_query, url, exc)
            raise errors.ForwardingFailed(f"Error while forwarding the request to the leader: {exc}") from None
