"""`logbroker dump-log`: Kafka's kafka-dump-log.sh. The work is in `logbroker.tools.dump_log`."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

import click

from logbroker.tools.dump_log import DEFAULT_MAX_MESSAGE_SIZE, INT32_MAX, DumpOptions, dump_files


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", metavar="[FILE]...", nargs=-1)
@click.option("--files", "-f", "files", multiple=True, metavar="FILE1,FILE2,...",
              help="Comma separated list of data and index files to dump (as Kafka's tool takes them).")
@click.option("--print-data-log", is_flag=True,
              help="Print each record's key and payload (implies --deep-iteration).")
@click.option("--deep-iteration", is_flag=True, help="Print every record, not only batches.")
@click.option("--index-sanity-check", is_flag=True,
              help="Only run the sanity check a broker runs on index files at startup.")
@click.option("--verify-index-only", is_flag=True,
              help="Check index entries against the log without printing them.")
@click.option("--skip-record-metadata", is_flag=True,
              help="Print record contents without their metadata (and skip control records).")
@click.option("--max-message-size", type=click.IntRange(1), default=DEFAULT_MAX_MESSAGE_SIZE, show_default=True,
              help="Largest batch expected when checking index entries.")
@click.option("--max-bytes", type=click.IntRange(1), default=INT32_MAX, show_default=True,
              help="Read at most this many bytes of each .log file.")
@click.option("--s3-endpoint", metavar="URL",
              help="Endpoint of the S3-compatible store for s3://bucket/key files (default: AWS).")
@click.option("--s3-region", metavar="REGION", default="us-east-1", show_default=True,
              help="Region of the bucket for s3://bucket/key files.")
def dump_log(paths: tuple[str, ...], files: tuple[str, ...], print_data_log: bool, deep_iteration: bool,
             index_sanity_check: bool, verify_index_only: bool, skip_record_metadata: bool,
             max_message_size: int, max_bytes: int, s3_endpoint: str | None, s3_region: str) -> None:
    """Print the batches, records and index entries of segment files, as kafka-dump-log.sh does.
    A file may be a tiered segment's object, `s3://bucket/key` (credentials from the AWS
    environment variables), or a file of the local remote store."""
    targets = [name for group in files for name in group.split(",") if name] + list(paths)
    if not targets:
        raise click.UsageError("Missing required argument \"[files]\": give FILE... or --files FILE1,FILE2")
    with tempfile.TemporaryDirectory(prefix="dump-log-") as scratch:
        _dump(fetch_remote_files(targets, Path(scratch), endpoint=s3_endpoint, region=s3_region),
              print_data_log=print_data_log, deep_iteration=deep_iteration,
              index_sanity_check=index_sanity_check, verify_index_only=verify_index_only,
              skip_record_metadata=skip_record_metadata, max_message_size=max_message_size,
              max_bytes=max_bytes)


def fetch_remote_files(targets: list[str], scratch: Path, *, endpoint: str | None, region: str) -> list[str]:
    """`targets` with each s3://bucket/key downloaded into `scratch` under its own name (a
    segment's .log and .index side by side, as the tool checks one against the other)."""
    from logbroker.errors import KafkaError
    from logbroker.remote.storage_manager import RemoteStorageManager

    local = []
    for target in targets:
        if not target.startswith("s3://"):
            local.append(target)
            continue
        bucket, _, key = target[len("s3://"):].partition("/")
        settings = {"s3.bucket": bucket, "s3.region": region, **({"s3.endpoint": endpoint} if endpoint else {})}
        try:
            data = asyncio.run(RemoteStorageManager.from_config("s3", settings).get(key))
        except KafkaError as exc:
            raise click.ClickException(f"Cannot read {target}: {exc}") from None
        path = scratch / key.rsplit("/", 1)[-1]
        path.write_bytes(data)
        local.append(str(path))
    return local


def _dump(targets: list[str], **flags) -> None:
    options = DumpOptions(**flags)
    failed = False
    try:
        for line in dump_files(targets, options):
            if line.stderr:
                failed = failed or line.failed
                sys.stdout.flush()
                click.echo(line.text, err=True)
            else:
                click.echo(line.text)
        sys.stdout.flush()
    except BrokenPipeError:
        # `logbroker dump-log … | head`: stop quietly, as a shell tool should; point stdout at
        # /dev/null so that the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    if failed:
        sys.exit(1)
