"""Which remote store `remote.log.storage.manager.class.name` names.

`s3` and `local`, or a class name in Kafka's form: one whose last part is `LocalTieredStorage`
(Kafka's own test store, org.apache.kafka.server.log.remote.storage.LocalTieredStorage) is the
local store; one whose last part contains `S3` (an S3 plugin's class) is the S3 store.
"""

from __future__ import annotations

from collections.abc import Callable

S3 = "s3"
LOCAL = "local"
RSM_CONFIG_PREFIX = "rsm.config."


def store_kind(class_name: str) -> str | None:
    """`s3`, `local`, or None when the name is neither."""
    name = class_name.strip()
    if name.lower() in (S3, LOCAL):
        return name.lower()
    last = name.rsplit(".", 1)[-1]
    if last == "LocalTieredStorage":
        return LOCAL
    if "S3" in last:
        return S3
    return None


def one_of_store_names() -> Callable[[object], str | None]:
    """A config check accepting what `store_kind` knows."""
    def check(value: object) -> str | None:
        return None if store_kind(str(value)) else (
            "must be s3, local, or a class name ending in LocalTieredStorage or naming S3")
    check.valid_values = "[s3, local, a Kafka class name]"  # type: ignore[attr-defined]
    return check
