"""Exactly-once streaming writes: a read_committed reader of the output sees each input record
once, whatever happens to the driver, the tasks or the brokers while the stream runs.

Each test runs the copy job (stream_copy_job.py) in its own driver process, so it can be killed
with SIGKILL (the Python driver, its JVM and its workers: the whole process group) and run again
on the same checkpoint.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from spark_kafka import consume_all, create_topic, new_topic_name, produce

# Each test runs up to three driver processes (a Spark JVM each, half a minute apiece on a busy
# machine); the suite's 120 s default is for one broker-bound test.
pytestmark = pytest.mark.timeout(300)

JOB = Path(__file__).with_name("stream_copy_job.py")
RECORDS = 3000


def produce_input(bootstrap: str, topic: str, partitions: int = 3) -> list[bytes]:
    create_topic(bootstrap, topic, partitions)
    values = [f"{i:06d}".encode() for i in range(RECORDS)]
    produce(bootstrap, topic, [{"value": v, "key": v[-2:], "partition": i % partitions}
                               for i, v in enumerate(values)])
    return values


def start_job(bootstrap: str, source: str, sink: str, checkpoint: Path, *extra: str
              ) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(JOB), "--bootstrap", bootstrap, "--input", source, "--output", sink,
         "--checkpoint", str(checkpoint), *extra],
        start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def kill_group(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(30)


def finish(process: subprocess.Popen, timeout_s: float = 240) -> None:
    try:
        _, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        kill_group(process)
        tail = (e.stderr or b"").decode(errors="replace")[-3000:]
        pytest.fail(f"the job did not finish within {timeout_s} s; its stderr ends with:\n{tail}")
    assert process.returncode == 0, stderr.decode(errors="replace")[-3000:]


def committed_batches(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    return sum(1 for p in commits.iterdir() if p.name.isdigit()) if commits.exists() else 0


def wait_for_commits(process: subprocess.Popen, checkpoint: Path, count: int,
                     timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while committed_batches(checkpoint) < count:
        assert process.poll() is None, "the job ended before it was killed"
        assert time.monotonic() < deadline, f"no {count} committed micro-batches"
        time.sleep(0.1)


def output_values(bootstrap: str, topic: str, partitions: int = 3) -> list[bytes]:
    return sorted(r["value"] for r in consume_all(bootstrap, topic, partitions,
                                                  isolation_level="read_committed"))


@pytest.mark.parametrize("master", ["local[2]"])
def test_driver_killed_at_random_moments_output_has_every_record_once(bootstrap, tmp_path,
                                                                       master):
    source, sink = new_topic_name(), new_topic_name()
    values = produce_input(bootstrap, source)
    create_topic(bootstrap, sink, 3)
    checkpoint = tmp_path / "checkpoint"
    rng = random.Random()
    seed = rng.randrange(1 << 30)
    rng.seed(seed)
    for kill in range(2):
        process = start_job(bootstrap, source, sink, checkpoint, "--master", master)
        # Kill mid-stream: after the next committed micro-batch, plus a random part of one.
        wait_for_commits(process, checkpoint, committed_batches(checkpoint) + 1)
        time.sleep(rng.uniform(0, 1.5))
        kill_group(process)
    assert committed_batches(checkpoint) < RECORDS // 300, "the stream ended before the kills"
    finish(start_job(bootstrap, source, sink, checkpoint, "--master", master))

    assert output_values(bootstrap, sink) == values, f"seed {seed}"


def test_tasks_failing_in_a_udf_are_retried_and_write_once(bootstrap, tmp_path):
    source, sink = new_topic_name(), new_topic_name()
    values = produce_input(bootstrap, source)
    create_topic(bootstrap, sink, 3)
    fail_dir = tmp_path / "failures"
    fail_dir.mkdir()
    finish(start_job(bootstrap, source, sink, tmp_path / "checkpoint",
                     "--master", "local[2,4]", "--fail-dir", str(fail_dir),
                     "--fail-suffix", "001497,002998", "--max-offsets", "1500"))

    # Records 1497 and 2998 are the last of their partition in micro-batches 0 and 1: each
    # failed the first attempt of its task, and Spark retried it. (Spark evaluates the UDF
    # ahead of the writer, so here the failed attempts had produced nothing yet; a task killed
    # while its transaction is open is the driver-kill tests' case.)
    assert sorted(p.name for p in fail_dir.iterdir()) == ["001497", "002998"]
    assert output_values(bootstrap, sink) == values


@pytest.mark.logbroker_cluster(brokers=3, **{"offsets.topic.replication.factor": "3"})
def test_leader_killed_during_the_stream_output_has_every_record_once(logbroker_cluster,
                                                                       tmp_path):
    cluster = logbroker_cluster
    source, sink = new_topic_name(), new_topic_name()
    cluster.create_topic(source, partitions=3, replication_factor=3)
    cluster.create_topic(sink, partitions=3, replication_factor=3)
    values = [f"{i:06d}".encode() for i in range(RECORDS)]
    produce(cluster.bootstrap, source, [{"value": v, "partition": i % 3}
                                        for i, v in enumerate(values)])
    checkpoint = tmp_path / "checkpoint"
    process = start_job(cluster.bootstrap, source, sink, checkpoint)
    wait_for_commits(process, checkpoint, 1)
    victim = cluster.leader(sink, 0)
    cluster.kill(victim)  # SIGKILL
    assert committed_batches(checkpoint) < RECORDS // 300
    finish(process)

    assert cluster.wait_for_leader(sink, 0, not_in=(victim,)) != victim
    assert output_values(cluster.bootstrap, sink) == values


def test_batch_committed_by_tasks_but_not_in_the_checkpoint_is_not_written_again(bootstrap,
                                                                                 tmp_path):
    """The case that makes Spark's Kafka sink at least once, made deterministic: the driver
    "dies" after the tasks of the last micro-batch committed and before the checkpoint recorded
    it — its commits/ entry is removed — so the restarted query replays that batch."""
    source, sink = new_topic_name(), new_topic_name()
    values = produce_input(bootstrap, source)
    create_topic(bootstrap, sink, 3)
    checkpoint = tmp_path / "checkpoint"
    args = ("--max-offsets", "1000")
    finish(start_job(bootstrap, source, sink, checkpoint, *args))
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    assert last == 2
    (checkpoint / "commits" / str(last)).unlink()
    for crc in (checkpoint / "commits").glob(f".{last}.crc"):
        crc.unlink()
    finish(start_job(bootstrap, source, sink, checkpoint, *args))

    assert committed_batches(checkpoint) == 3  # batch 2 ran again
    assert output_values(bootstrap, sink) == values
    assert len(consume_all(bootstrap, sink, 3, isolation_level="read_uncommitted")) == RECORDS
