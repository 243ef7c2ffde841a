"""The remote store (Kafka's RemoteStorageManager): an S3 bucket or a local directory, one interface.

Both stores are obstore object stores (`S3Store`, `LocalStore`) with the same keys
(remote/metadata.py). obstore was chosen over aiobotocore because it is async at its core (the
requests, file reads and multipart uploads run in its Rust runtime's threads, never on our event
loop), uploads a file from its path in parallel parts without reading it into Python, does ranged
GETs, and serves S3 and the local filesystem through one API; aiobotocore would bring aiohttp and
botocore's request machinery for S3 alone, and a second code path for the local store.

Credentials for S3 come from the usual AWS environment variables (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION) or the instance's role. Every failure of the
store is a RemoteStorageError naming the object, in one line; a missing object is
RemoteResourceNotFoundError; an object shorter than its metadata says is one too.

A request that cannot reach the store is retried a few times within seconds, not obstore's default
of ten times over up to three minutes (STORE_RETRIES): the task then reports the failure, counts
it and goes on to its other partitions, and a remote read fails while its fetch still waits.

Threads: every method is a coroutine that only awaits the store; none blocks the event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import obstore
from obstore.exceptions import PermissionDeniedError, UnauthenticatedError
from obstore.store import LocalStore, S3Store

from logbroker.errors import InvalidConfigError, NotLeaderOrFollowerError, UnknownServerError
from logbroker.remote.metadata import (
    COPY_SEGMENT_FINISHED,
    DELETE_SEGMENT_STARTED,
    METADATA,
    RemoteLogSegmentMetadata,
)
from logbroker.remote.store_names import LOCAL, S3, store_kind

log = logging.getLogger("kafka.log.remote.RemoteStorageManager")


# A file is uploaded in parts of PART_BYTES, PARTS_IN_FLIGHT at a time (S3 multipart): 64 PUTs a
# GB, and at most 64 MiB of a segment in memory while it goes.
PART_BYTES = 16 << 20
PARTS_IN_FLIGHT = 4
# Each request: 3 retries, 0.1 s then doubling up to 2 s apart, none started after 10 s; connecting
# may take 5 s, an endpoint may be silent for 10 s (a stalled connection), and a whole request
# may take 60 s (a 16 MiB part at 2 Mbit/s).
STORE_RETRIES = {"max_retries": 3, "retry_timeout": timedelta(seconds=10),
                 "backoff": {"init_backoff": timedelta(milliseconds=100), "max_backoff": timedelta(seconds=2),
                             "base": 2}}
STORE_TIMEOUTS = {"connect_timeout": "5s", "read_timeout": "10s", "timeout": "60s"}


class RemoteStorageError(UnknownServerError):
    """The remote store failed (Kafka's RemoteStorageException): unreachable, refused, or bad data.
    As in Kafka, whose Errors know no code for it, a client sees UNKNOWN_SERVER_ERROR."""


class RemoteResourceNotFoundError(RemoteStorageError):
    """An object the metadata names is not in the store (Kafka's RemoteResourceNotFoundException)."""


class RemoteStorageManager:
    """Copies, reads and deletes remote segments, and lists what a partition has in the store."""

    def __init__(self, store, *, description: str) -> None:
        self._store = store
        self.description = description

    @classmethod
    def from_config(cls, class_name: str | None, settings: dict[str, str]) -> RemoteStorageManager:
        """The store `remote.log.storage.manager.class.name` names, set up from the `rsm.config.`
        settings (`s3.bucket`, `s3.endpoint`, `s3.region`, `s3.prefix`, and optionally
        `s3.access.key.id` / `s3.secret.access.key`; `dir`). Raises
        InvalidConfigError naming the missing or bad key."""
        kind = store_kind(class_name or "")
        if kind == S3:
            bucket = settings.get("s3.bucket")
            if not bucket:
                raise InvalidConfigError("rsm.config.s3.bucket must be set for the s3 remote store")
            endpoint = settings.get("s3.endpoint")
            config = {"region": settings.get("s3.region", "us-east-1")}
            if endpoint:
                config["endpoint"] = endpoint
            if settings.get("s3.access.key.id"):  # else the AWS environment variables
                config["access_key_id"] = settings["s3.access.key.id"]
                config["secret_access_key"] = settings.get("s3.secret.access.key", "")
            prefix = settings.get("s3.prefix", "").strip("/")
            store = S3Store(bucket, prefix=prefix or None, config=config, retry_config=STORE_RETRIES,
                            client_options={**STORE_TIMEOUTS,
                                            "allow_http": bool(endpoint and endpoint.startswith("http://"))})
            return cls(store, description=f"s3://{bucket}/{prefix}")
        if kind == LOCAL:
            directory = settings.get("dir")
            if not directory:
                raise InvalidConfigError("rsm.config.dir must be set for the local remote store")
            Path(directory).mkdir(parents=True, exist_ok=True)
            return cls(LocalStore(directory), description=str(directory))
        raise InvalidConfigError("remote.log.storage.manager.class.name must be set to s3 or local "
                                 "when remote.log.storage.system.enable is true")

    # --- segments ------------------------------------------------------------------------------

    async def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata,
                                    files: dict[str, Path | bytes],
                                    may_commit: Callable[[], bool] = lambda: True) -> None:
        """Upload a segment's files (suffix → a path or bytes), then its metadata: that last write
        commits the copy. A failure leaves objects that reconciliation deletes as orphans (store_survey.py).
        `may_commit` is asked right before the metadata is written (is the copier still the
        leader?); when it says no, the files written are deleted and NotLeaderOrFollowerError
        raised."""
        for suffix, source in files.items():
            await self.put(metadata.key(suffix), source)
        if not may_commit():
            await self.delete_keys([metadata.key(suffix) for suffix in files])
            raise NotLeaderOrFollowerError(
                f"Not committing the copy of {metadata.directory} {metadata.start_offset}-"
                f"{metadata.end_offset}: this broker no longer leads the partition at that epoch")
        await self.put(metadata.key(METADATA), metadata.with_state(COPY_SEGMENT_FINISHED).to_json())

    async def fetch_log_segment(self, metadata: RemoteLogSegmentMetadata, start: int, end: int) -> bytes:
        """Bytes [start, end) of the segment's .log (fewer at its end). RemoteStorageError when
        the object holds fewer than its metadata's size (a truncated object)."""
        key = metadata.key(".log")
        end = min(end, metadata.segment_size_in_bytes)
        if start >= end:
            return b""
        try:
            data = bytes(await obstore.get_range_async(self._store, key, start=start, end=end))
        except Exception as exc:  # noqa: BLE001 - the one place the store's errors are mapped
            raise mapped_error(exc, key) from exc
        if len(data) != end - start:
            raise RemoteStorageError(f"Remote object {key} is shorter than its metadata says: bytes "
                                     f"{start}-{end} asked, {len(data)} read of "
                                     f"{metadata.segment_size_in_bytes}")
        return data

    async def fetch_file(self, metadata: RemoteLogSegmentMetadata, suffix: str) -> bytes:
        """One whole file of a segment (an index, the snapshot, the epochs)."""
        return await self.get(metadata.key(suffix))

    async def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        """DELETE_SEGMENT_STARTED, then the files, then the metadata (see metadata.py)."""
        if metadata.state != DELETE_SEGMENT_STARTED:
            await self.put(metadata.key(METADATA), metadata.with_state(DELETE_SEGMENT_STARTED).to_json())
        await self.delete_keys(metadata.data_keys())
        await self.delete_keys([metadata.key(METADATA)])

    # --- listing and raw objects ------------------------------------------------------------------

    async def get_metadata(self, key: str) -> RemoteLogSegmentMetadata:
        """A segment's `.metadata` object, parsed. RemoteResourceNotFoundError when it is gone;
        RemoteStorageError for bytes that are no such metadata — its files may hold the only copy
        of the records, so they are kept, and the partition is not loaded (nothing copied,
        expired or read remotely) until the object is mended."""
        raw = await self.get(key)
        try:
            return RemoteLogSegmentMetadata.from_json(raw)
        except (ValueError, KeyError, TypeError) as exc:
            raise RemoteStorageError(f"Unreadable remote segment metadata {key} "
                                     f"({type(exc).__name__}: {exc}); mend or delete it") from exc

    async def list_keys(self, prefix: str | None = None) -> list[str]:
        """The keys below the directory `prefix` (whole path segments: `a/b` lists `a/b/…`)."""
        return [key for key, _ in await self.list_objects(prefix)]

    async def list_objects(self, prefix: str | None = None) -> list[tuple[str, int]]:
        """(key, last modified in ms since the epoch) of the objects below the directory `prefix`."""
        try:
            found = []
            async for batch in obstore.list(self._store, prefix):
                found.extend((item["path"], int(item["last_modified"].timestamp() * 1000)) for item in batch)
            return found
        except Exception as exc:  # noqa: BLE001
            raise mapped_error(exc, prefix or "/") from exc

    async def list_directories(self) -> list[str]:
        """The top-level directories (one per partition ever tiered)."""
        try:
            found = await obstore.list_with_delimiter_async(self._store)
        except Exception as exc:  # noqa: BLE001
            raise mapped_error(exc, "/") from exc
        return [p.rstrip("/") for p in found["common_prefixes"]]

    async def exists(self, key: str) -> bool:
        try:
            await obstore.head_async(self._store, key)
            return True
        except FileNotFoundError:
            return False
        except (PermissionDeniedError, UnauthenticatedError):
            pass  # S3 answers a HEAD with a bare 403: a GET's answer names the S3 error code
        except Exception as exc:  # noqa: BLE001
            raise mapped_error(exc, key) from exc
        try:
            await self.get(key)
            return True
        except RemoteResourceNotFoundError:
            return False

    async def get(self, key: str) -> bytes:
        try:
            result = await obstore.get_async(self._store, key)
            return bytes(await result.bytes_async())
        except Exception as exc:  # noqa: BLE001
            raise mapped_error(exc, key) from exc

    async def copy(self, source: str, target: str) -> None:
        """A copy made by the store itself (S3 CopyObject), no bytes through this process."""
        try:
            await obstore.copy_async(self._store, source, target)
        except Exception as exc:  # noqa: BLE001
            raise mapped_error(exc, source) from exc

    async def delete_keys(self, keys: list[str]) -> None:
        """Delete objects; one already gone is no error."""
        for key in keys:
            try:
                await obstore.delete_async(self._store, key)
            except FileNotFoundError:
                pass
            except Exception as exc:  # noqa: BLE001
                raise mapped_error(exc, key) from exc

    async def put(self, key: str, source: Path | bytes) -> None:
        try:
            await obstore.put_async(self._store, key, source, chunk_size=PART_BYTES,
                                    max_concurrency=PARTS_IN_FLIGHT)
        except Exception as exc:  # noqa: BLE001
            raise mapped_error(exc, key, writing=True) from exc


def mapped_error(exc: Exception, key: str, *, writing: bool = False) -> RemoteStorageError:
    """The store's error as ours, in one line (obstore's messages carry a debug dump after it)."""
    if isinstance(exc, FileNotFoundError):
        if writing:  # S3 answers NoSuchBucket with 404 too
            return RemoteStorageError(f"Cannot write {key} to the remote store: the bucket does not exist")
        return RemoteResourceNotFoundError(f"Remote object {key} not found")
    text = str(exc).strip()
    for code, meaning in _S3_CODES.items():
        if f"<Code>{code}</Code>" in text:
            return RemoteStorageError(f"Remote store failed on {key}: {meaning} ({code})")
    if isinstance(exc, (PermissionDeniedError, UnauthenticatedError)):  # an answer without a code
        return RemoteStorageError(f"Remote store failed on {key}: the credentials were refused or lack "
                                  f"a permission (HTTP 403)")
    for cause, meaning in _CONNECT_FAILURES.items():
        if cause in text:
            return RemoteStorageError(f"Remote store failed on {key}: cannot reach the endpoint ({meaning})")
    first = text.splitlines()[0][:400] if text else ""
    return RemoteStorageError(f"Remote store failed on {key}: {type(exc).__name__}: {first}")


# S3 error codes worth naming in the one log line (the rest show the store's first line).
_S3_CODES = {
    "NoSuchBucket": "the bucket does not exist",
    "AccessDenied": "access denied",
    "InvalidAccessKeyId": "the credentials were refused",
    "SignatureDoesNotMatch": "the credentials were refused",
}

# What obstore's message (its debug dump after the first line) says when the endpoint did not
# answer: no connection made, or no answer within the timeouts.
_CONNECT_FAILURES = {
    "Connection refused": "connection refused",
    "dns error": "the host name does not resolve",
    "tcp connect error": "cannot connect",
    "kind: Timeout": "timed out",
    "operation timed out": "timed out",
}
