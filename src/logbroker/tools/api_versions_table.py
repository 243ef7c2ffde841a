"""docs/reference/api-versions.md from a running broker's ApiVersions answer.

    python -m logbroker.tools.api_versions_table --bootstrap-server 127.0.0.1:9092 \
        [--output docs/reference/api-versions.md]

Asks the broker for ApiVersions (v3) and writes the table of every API it answers, with its
version range, as Markdown (to stdout without --output). The doc is what clients see, not what
the source says: tests/tools/test_api_versions_table.py regenerates it from a real broker and
compares it with the committed file, so the two cannot drift.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Iterable, Sequence

from logbroker.protocol.apis import ApiKey

HEADER = """\
# API versions

The Kafka APIs a logbroker broker answers and the versions of each, as its ApiVersions response
advertises them (clients pick, per API, the highest version both sides support). Generated from
a running broker by `python -m logbroker.tools.api_versions_table --bootstrap-server HOST:PORT
--output docs/reference/api-versions.md`; a test checks that this file equals the broker's answer.

| Key | API | Min | Max |
| ---: | --- | ---: | ---: |
"""


def api_name(api_key: int) -> str:
    """Kafka's name of an API (ApiKeys' `name`): LIST_OFFSETS → ListOffsets."""
    try:
        return "".join(part.capitalize() for part in ApiKey(api_key).name.split("_"))
    except ValueError:
        return f"Api{api_key}"


def render(entries: Iterable[tuple[int, int, int]]) -> str:
    """The Markdown page for `(api key, min version, max version)` entries."""
    rows = [f"| {key} | {api_name(key)} | {lo} | {hi} |" for key, lo, hi in sorted(entries)]
    return HEADER + "\n".join(rows) + "\n"


async def fetch_api_versions(host: str, port: int) -> list[tuple[int, int, int]]:
    """One ApiVersions v3 round trip: the broker's `(api key, min, max)` entries."""
    from kio.schema.api_versions.v3.request import ApiVersionsRequest

    from logbroker.client import KafkaConnection

    connection = KafkaConnection(host, port, client_id="api-versions-table")
    try:
        answer = await connection.request(ApiVersionsRequest(
            client_software_name="logbroker-api-versions-table", client_software_version="1"))
    finally:
        await connection.close()
    return [(int(a.api_key), int(a.min_version), int(a.max_version)) for a in answer.api_keys]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m logbroker.tools.api_versions_table",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-server", required=True, help="host:port of a running broker")
    parser.add_argument("--output", help="file to write (default: stdout)")
    args = parser.parse_args(argv)
    host, _, port = args.bootstrap_server.rpartition(":")
    page = render(asyncio.run(fetch_api_versions(host, int(port))))
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(page)
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
