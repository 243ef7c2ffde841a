"""Delegation tokens of a cluster, in ZooKeeper where Kafka's ZooKeeper-era brokers keep them:

    /delegation_token/tokens/<token id>                      the token's JSON (security/delegation_token.py)
    /delegation_token/token_changes/token_change_<10 digits>  the token id, one notice per change

`ZkDelegationTokenStore` has the token half of the metadata-store interface (`delegation_tokens`,
`put_delegation_token`, `remove_delegation_token`). A write changes the token znode and adds its
notice in one multi(), so Kafka's brokers (which follow the notices) see it too. Ours read the
token znodes directly: `watch()` keeps a ChildrenWatch on the tokens and a DataWatch on each, so a
token made, renewed or expired through any broker is seen by every broker within a ZooKeeper round
trip. The HMAC is never stored; each broker recomputes it from the shared secret.

Writes and `watch()` block on ZooKeeper (call them from a thread). Watch callbacks run on kazoo's
thread and replace whole entries, so the event loop reads the cache without a lock.
"""

from __future__ import annotations

import logging

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError, NodeExistsError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from logbroker.security.delegation_token import TokenInformation, decode_token, encode_token

log = logging.getLogger("kafka.server.DelegationTokenManager")

TOKENS = "/delegation_token/tokens"
TOKEN_CHANGES = "/delegation_token/token_changes"
TOKEN_CHANGE_PREFIX = "token_change_"


class ZkDelegationTokenStore:
    def __init__(self, client: KazooClient) -> None:
        self._client = client
        self._tokens: dict[str, TokenInformation] = {}
        self._watched: set[str] = set()

    def delegation_tokens(self) -> dict[str, TokenInformation]:
        return dict(self._tokens)

    def put_delegation_token(self, info: TokenInformation) -> None:
        path, data = f"{TOKENS}/{info.token_id}", encode_token(info)
        txn = self._client.transaction()
        if self._client.exists(path):
            txn.set_data(path, data)
        else:
            txn.create(path, data)
        txn.create(f"{TOKEN_CHANGES}/{TOKEN_CHANGE_PREFIX}", info.token_id.encode(), sequence=True)
        self._commit(txn)
        self._tokens[info.token_id] = info

    def remove_delegation_token(self, token_id: str) -> None:
        txn = self._client.transaction()
        txn.delete(f"{TOKENS}/{token_id}")
        txn.create(f"{TOKEN_CHANGES}/{TOKEN_CHANGE_PREFIX}", token_id.encode(), sequence=True)
        try:
            self._commit(txn)
        except NoNodeError:
            pass  # another broker purged it first
        self._tokens.pop(token_id, None)

    @staticmethod
    def _commit(txn) -> None:
        failed = next((r for r in txn.commit() if isinstance(r, Exception)), None)
        if failed is not None:
            raise failed

    def watch(self) -> None:
        """Make the paths, load every token and keep the cache current (blocks on ZooKeeper)."""
        for path in (TOKENS, TOKEN_CHANGES):
            try:
                self._client.ensure_path(path)
            except NodeExistsError:
                pass
        ChildrenWatch(self._client, TOKENS, self._on_tokens)

    def _on_tokens(self, children: list[str]) -> None:
        for child in children:
            if child not in self._watched:
                self._watched.add(child)
                DataWatch(self._client, f"{TOKENS}/{child}", self._token_watcher(child))

    def _token_watcher(self, token_id: str):
        # Two parameters exactly: kazoo passes a third (the event) to a callback that takes more.
        return lambda data, stat: self._on_token(token_id, data, stat)

    def _on_token(self, token_id: str, data: bytes | None, stat) -> bool | None:
        if stat is None:
            self._tokens.pop(token_id, None)
            self._watched.discard(token_id)
            return False
        try:
            self._tokens[token_id] = decode_token(data or b"")
        except ValueError as exc:
            log.warning("Ignoring delegation token znode %s: %s", token_id, exc)
        return None
