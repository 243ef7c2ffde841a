"""Reading a broker's offset checkpoint files (recovery-point-offset-checkpoint,
replication-offset-checkpoint, log-start-offset-checkpoint) in tests, one broker or a cluster.

Importable from any test directory: tests/ is on sys.path as the directory of the top conftest.
"""

from __future__ import annotations

from pathlib import Path


def read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """A Kafka offset checkpoint: `0`, a count, then `topic partition offset` lines."""
    lines = path.read_text().splitlines()
    assert lines[0] == "0", f"{path.name}: version line {lines[0]!r}"
    count = int(lines[1])
    assert len(lines) == 2 + count, f"{path.name}: count {count} but {len(lines) - 2} entries"
    entries = {}
    for line in lines[2:]:
        topic, partition, offset = line.split(" ")
        entries[(topic, int(partition))] = int(offset)
    return entries


def checkpointed(data_dir: Path, name: str, topic: str, partition: int = 0) -> int | None:
    """The offset the checkpoint file `name` in `data_dir` holds for the partition, None when
    the file or the entry is not there yet."""
    path = data_dir / name
    return read_checkpoint(path).get((topic, partition)) if path.exists() else None
