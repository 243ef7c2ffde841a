"""The small text files a log directory keeps beside its partitions, in Kafka's formats.

- `OffsetCheckpointFile`: `recovery-point-offset-checkpoint`, `replication-offset-checkpoint`
  (high watermarks), `log-start-offset-checkpoint`, `cleaner-offset-checkpoint`.
- `PartitionMetadataFile`: `<topic>-<n>/partition.metadata`, the partition's topic id.
- `BrokerMetadata`: `meta.properties`, the broker id and cluster id that own the directory.
- The clean-shutdown marker `.kafka_cleanshutdown`.

(`leader-epoch-checkpoint` has the offset checkpoint's shape and lives with its cache in
`leader_epoch_cache.py`.)

Nothing from a client reaches these files unchecked: a topic name is validated where the topic is
created (metadata/controller.py), and, as a second line of defence, `OffsetCheckpointFile.write`
refuses (UnreadableCheckpointEntryError, before touching the file) an entry it could not read back
— a name holding whitespace or a line break would split its line and make the whole file
unreadable, losing the offsets of every partition in the log dir. The old file then
stays as it was: stale offsets are safe (recovery starts earlier, high watermarks only rise).

Every write goes to `<file>.tmp`, is fsynced, renamed over the file and the directory fsynced,
so after a crash a reader finds either the old content or the new, never a torn mix; a stray
`.tmp` is ignored. All of this blocks on disk: call it off the event loop when it matters.
"""

from __future__ import annotations

import base64
import os
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from logbroker.errors import KafkaStorageError
from logbroker.types import TopicPartition

RECOVERY_POINT_CHECKPOINT_FILE = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT_FILE = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT_FILE = "cleaner-offset-checkpoint"
PARTITION_METADATA_FILE = "partition.metadata"
META_PROPERTIES_FILE = "meta.properties"
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"

_WHITESPACE = re.compile(r"\s+")


class UnreadableCheckpointEntryError(KafkaStorageError):
    """An entry that the checkpoint's reader would not read back as written (e.g. a topic name
    with a newline); the file is left untouched."""


# --- atomic writes ---------------------------------------------------------------------------


def fsync_dir(directory: str | os.PathLike) -> None:
    """fsync a directory so that a rename or create in it survives a crash."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_tree(directory: str | os.PathLike) -> None:
    """Remove a directory and everything in it, ignoring what is gone already."""
    import shutil  # here, not at start: shutil loads bz2 and lzma (~0.4 MiB) that only this needs

    shutil.rmtree(directory, ignore_errors=True)


def fsync_file(path: str | os.PathLike) -> None:
    """fsync a file written without sync, then its directory; nothing if it is gone already
    (deleted meanwhile). Blocks on disk."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(Path(path).parent)


def write_file_atomically(path: str | os.PathLike, data: bytes, *, sync: bool = True) -> None:
    """Replace `path` by `data`: write `<path>.tmp`, fsync it, rename it over `path`, fsync the
    directory. With `sync=False` the two fsyncs are skipped (the rename stays atomic, but a crash
    may bring back the old content). Raises KafkaStorageError naming the file on an I/O error.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        if sync:
            fsync_dir(path.parent)
    except OSError as e:
        raise KafkaStorageError(f"Error while writing to checkpoint file {path}: {e}") from e


# --- offset checkpoints ----------------------------------------------------------------------


class CheckpointFile:
    """Kafka's CheckpointFile: a version line, a count line, then one entry per line.

        0
        2
        <entry>
        <entry>

    Lines end with '\\n'. `read` checks the version, that every line parses and that the count
    matches, and raises KafkaStorageError naming the file otherwise. A missing file reads as
    empty. Subclasses give the entry format.
    """

    VERSION = 0

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def _format_entries(self, lines: list[str]) -> bytes:
        return "".join(f"{line}\n" for line in [str(self.VERSION), str(len(lines)), *lines]).encode()

    def _write_lines(self, lines: list[str], *, sync: bool = True) -> None:
        write_file_atomically(self.path, self._format_entries(lines), sync=sync)

    def _read_lines(self, parse: Callable[[list[str]], object]) -> list:
        """Parse each entry line (split on whitespace) with `parse`; it raises ValueError on a
        malformed line."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        except (OSError, UnicodeDecodeError) as e:
            raise KafkaStorageError(f"Error while reading checkpoint file {self.path}: {e}") from e
        if not text.splitlines():
            return []
        try:
            return parse_checkpoint_text(text, version=self.VERSION, parse=parse, source=str(self.path))
        except ValueError as e:
            raise KafkaStorageError(str(e)) from None


def parse_checkpoint_text(text: str, *, version: int, parse: Callable[[list[str]], object],
                          source: str) -> list:
    """The entries of a checkpoint's text: the `version` line, the entry count, then one entry a
    line (split on whitespace, parsed by `parse`, which raises ValueError on a malformed line).
    ValueError, naming `source`, for text not in that format."""
    lines = text.splitlines()
    first = lines[0] if lines else ""
    if first.strip() != str(version):
        raise ValueError(f"Unrecognized version of the checkpoint file ({source}): {first!r}")
    if len(lines) < 2:
        raise ValueError(f"Malformed checkpoint file ({source}): no entry count line")
    try:
        expected = int(lines[1].strip())
    except ValueError:
        raise ValueError(f"Malformed line in checkpoint file ({source}): {lines[1]!r}") from None
    entries = []
    for line in lines[2:]:
        if not line.strip():
            continue
        try:
            entries.append(parse(_WHITESPACE.split(line.strip())))
        except (ValueError, IndexError):
            raise ValueError(f"Malformed line in checkpoint file ({source}): {line!r}") from None
    if len(entries) != expected:
        raise ValueError(f"Expected {expected} entries in checkpoint file ({source}), "
                         f"but found {len(entries)}")
    return entries


def _parse_offset_entry(fields: list[str]) -> tuple[TopicPartition, int]:
    if len(fields) != 3:
        raise ValueError(fields)
    topic, partition, offset = fields
    return TopicPartition(topic, int(partition)), int(offset)


class OffsetCheckpointFile(CheckpointFile):
    """`topic partition offset` per line (Kafka's OffsetCheckpointFile), e.g.

        0
        2
        orders 0 1234
        orders 1 987

    Entries are written sorted by topic and partition (Kafka writes map order; readers don't
    care). Used for the recovery points, high watermarks, log start offsets and cleaner offsets of
    every partition in one log directory.
    """

    def write(self, offsets: Mapping[TopicPartition, int], *, sync: bool = True) -> None:
        """Replace the file's entries (blocks on disk; atomic, see the module docstring).

        UnreadableCheckpointEntryError, and the file unchanged, if any entry would not read back
        as written."""
        lines = [self._entry_line(tp, offset) for tp, offset in sorted(offsets.items())]
        self._write_lines(lines, sync=sync)

    def _entry_line(self, tp: TopicPartition, offset: int) -> str:
        line = f"{tp.topic} {tp.partition} {offset}"
        try:
            line.encode("utf-8")
            readable = (line.splitlines() == [line]
                        and _parse_offset_entry(_WHITESPACE.split(line.strip())) == (tp, offset))
        except (ValueError, UnicodeError):
            readable = False
        if not readable:
            raise UnreadableCheckpointEntryError(
                f"Refusing to write {self.path}: the entry for partition {tp.partition} of topic "
                f"{tp.topic!r} would not read back (offset {offset})")
        return line

    def read(self) -> dict[TopicPartition, int]:
        """The entries; {} if the file is missing. KafkaStorageError if it is malformed."""
        return dict(self._read_lines(_parse_offset_entry))


# --- topic ids -------------------------------------------------------------------------------


def uuid_to_kafka_str(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: the 16 bytes in URL-safe base64 without padding (22 chars)."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def kafka_str_to_uuid(text: str) -> uuid.UUID:
    """Kafka's Uuid.fromString. Raises ValueError for anything but 22 base64url characters."""
    text = text.strip()
    if len(text) != 22:
        raise ValueError(f"Input string with prefix {text[:22]!r} is too long or too short to be "
                         f"decoded as a base64 UUID")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (ValueError, TypeError) as e:
        raise ValueError(f"Invalid base64 UUID {text!r}: {e}") from None
    if len(raw) != 16:
        raise ValueError(f"Invalid base64 UUID {text!r}")
    return uuid.UUID(bytes=raw)


def random_kafka_uuid() -> uuid.UUID:
    """A random id whose string form does not start with '-' (as Kafka's Uuid.randomUuid, so it
    cannot be taken for a command-line option), and is not the all-zero id."""
    while True:
        value = uuid.uuid4()
        text = uuid_to_kafka_str(value)
        if not text.startswith("-") and value.int > 1:
            return value


class PartitionMetadataFile:
    """`partition.metadata` in a partition directory: the topic id the partition belongs to.

    Two lines, the second without a trailing newline (Kafka's PartitionMetadataFileFormatter):

        version: 0
        topic_id: <base64url uuid, 22 chars>

    It lets a broker notice that a directory left from a deleted topic is not the current topic
    of the same name.
    """

    VERSION = 0

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def exists(self) -> bool:
        return self.path.exists()

    def write(self, topic_id: uuid.UUID) -> None:
        """Write atomically with fsync (blocks on disk)."""
        text = f"version: {self.VERSION}\ntopic_id: {uuid_to_kafka_str(topic_id)}"
        write_file_atomically(self.path, text.encode("ascii"))

    def read(self) -> uuid.UUID:
        """The topic id. KafkaStorageError naming the file if it is missing or malformed."""
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise KafkaStorageError(f"Error while reading partition metadata file {self.path}: {e}") from e
        fields = {}
        for line in lines:
            if not line.strip():
                continue
            key, sep, value = line.partition(":")
            if not sep:
                raise KafkaStorageError(f"Malformed line in partition metadata file {self.path}: {line!r}")
            fields[key.strip()] = value.strip()
        if fields.get("version") != str(self.VERSION):
            raise KafkaStorageError(
                f"Unrecognized version of partition metadata file {self.path}: {fields.get('version')!r}")
        try:
            return kafka_str_to_uuid(fields["topic_id"])
        except (KeyError, ValueError) as e:
            raise KafkaStorageError(f"Invalid topic_id in partition metadata file {self.path}: {e}") from None


# --- meta.properties -------------------------------------------------------------------------


def _unescape_properties_value(text: str) -> str:
    out = []
    chars = iter(text)
    for ch in chars:
        if ch != "\\":
            out.append(ch)
            continue
        nxt = next(chars, "")
        if nxt == "u":
            code = "".join(next(chars, "") for _ in range(4))
            out.append(chr(int(code, 16)))
        else:
            out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
    return "".join(out)


def parse_java_properties(text: str) -> dict[str, str]:
    """Parse java.util.Properties text as Kafka's property files use it: `#`/`!` comments,
    `key=value`, `key: value` or `key value`, backslash escapes and line continuations."""
    props: dict[str, str] = {}
    logical: list[str] = []
    pending: str | None = None
    for raw in text.splitlines():
        line = raw.lstrip()
        if pending is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = (pending or "") + line[:-1]
            continue
        logical.append((pending or "") + line)
        pending = None
    if pending:
        logical.append(pending)
    for line in logical:
        i, n = 0, len(line)
        while i < n and line[i] not in "=: \t\f":
            i += 2 if line[i] == "\\" else 1
        key = line[:i]
        while i < n and line[i] in " \t\f":
            i += 1
        if i < n and line[i] in "=:":
            i += 1
            while i < n and line[i] in " \t\f":
                i += 1
        props[_unescape_properties_value(key)] = _unescape_properties_value(line[i:])
    return props


def _java_date(epoch_s: float) -> str:
    """java.util.Date.toString(), e.g. `Tue Jun 13 10:55:38 UTC 2023` (in UTC)."""
    return time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(epoch_s))


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    """`meta.properties` in every log directory (Kafka's ZooKeeper-era v0 format):

        #
        #Tue Jun 13 10:55:38 UTC 2023
        cluster.id=MkU3OEVBNTcwNTJENDM2Qg
        version=0
        broker.id=0

    Written on first start (with fsync, atomically) and checked on every later start, so that a
    data directory cannot silently be used by another broker or joined to another cluster.
    `cluster_id` may be absent in files written by very old Kafka versions.
    """

    broker_id: int
    cluster_id: str | None = None
    version: int = 0

    def to_text(self, *, now_s: float | None = None) -> str:
        lines = ["#", f"#{_java_date(time.time() if now_s is None else now_s)}"]
        if self.cluster_id is not None:
            lines.append(f"cluster.id={self.cluster_id}")
        lines.append(f"version={self.version}")
        lines.append(f"broker.id={self.broker_id}")
        return "\n".join(lines) + "\n"

    def write(self, path: str | os.PathLike) -> None:
        write_file_atomically(path, self.to_text().encode("utf-8"))

    @classmethod
    def read(cls, path: str | os.PathLike) -> BrokerMetadata | None:
        """The metadata in `path`, None if the file does not exist; KafkaStorageError naming the
        file if it cannot be read or lacks a valid version or broker.id."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as e:
            raise KafkaStorageError(f"Failed to read {path}: {e}") from e
        props = parse_java_properties(text)
        try:
            version = int(props["version"])
        except (KeyError, ValueError):
            raise KafkaStorageError(f"{path} has no valid 'version' property") from None
        if version != 0:
            raise KafkaStorageError(
                f"{path} has version {version}, written by a KRaft-mode broker; logbroker reads "
                f"the ZooKeeper-era version 0 only")
        try:
            broker_id = int(props["broker.id"])
        except (KeyError, ValueError):
            raise KafkaStorageError(f"{path} has no valid 'broker.id' property") from None
        return cls(broker_id=broker_id, cluster_id=props.get("cluster.id"), version=version)


# --- the clean shutdown marker ---------------------------------------------------------------


def write_clean_shutdown_file(log_dir: str | os.PathLike, *, broker_epoch: int = -1) -> None:
    """Leave `.kafka_cleanshutdown` in a log dir: every log in it was flushed and closed.

    The content is what Kafka 3.7+ writes, `{"version":0,"brokerEpoch":N}`; readers (ours and
    Kafka's) test only that the file exists.
    """
    data = f'{{"version":0,"brokerEpoch":{broker_epoch}}}'.encode("ascii")
    write_file_atomically(Path(log_dir) / CLEAN_SHUTDOWN_FILE, data)


def has_clean_shutdown_file(log_dir: str | os.PathLike) -> bool:
    return (Path(log_dir) / CLEAN_SHUTDOWN_FILE).exists()


def delete_clean_shutdown_file(log_dir: str | os.PathLike) -> None:
    """Remove the marker (and fsync the dir), so a crash from now on counts as unclean."""
    path = Path(log_dir) / CLEAN_SHUTDOWN_FILE
    try:
        path.unlink()
    except FileNotFoundError:
        return
    except OSError as e:
        raise KafkaStorageError(f"Failed to delete {path}: {e}") from e
    fsync_dir(log_dir)

