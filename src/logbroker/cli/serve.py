"""`logbroker serve`: start a broker — with no arguments, the embedded default on 127.0.0.1:9092.

The click command, for `logbroker serve --help` and a command line cli/entry.py does not take
itself; the work is cli/run_broker.py's.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from logbroker.cli.run_broker import EVENT_LOOP_ENV, EVENT_LOOPS, BadArgument, parse_log_levels, parse_overrides
from logbroker.cli.run_broker import serve as run_serve


@click.command()
@click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
              help="A Kafka server.properties file.")
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Set a broker config key, as kafka-server-start.sh --override does. Repeatable.")
@click.option("--log-level", "log_levels", multiple=True, metavar="[LOGGER=]LEVEL",
              help="INFO (the default), DEBUG, WARN, …; or LOGGER=LEVEL for one component, e.g. "
                   "kafka.request.logger=DEBUG. Repeatable.")
@click.option("--event-loop", type=click.Choice(EVENT_LOOPS), default="uvloop", show_default=True,
              envvar=EVENT_LOOP_ENV, show_envvar=True,
              help="The event loop the broker runs on: uvloop (libuv's, less CPU per request) or asyncio "
                   "(the standard library's: to rule uvloop out when chasing a bug).")
def serve(config_file: Path | None, overrides: tuple[str, ...], log_levels: tuple[str, ...],
          event_loop: str) -> None:
    """Start a broker. With no arguments: 127.0.0.1:9092, data in ./logbroker-data."""
    started = time.monotonic()
    try:
        levels = parse_log_levels(log_levels)
        props = parse_overrides(overrides)
    except BadArgument as exc:
        raise click.BadParameter(str(exc), param_hint=exc.option) from None
    sys.exit(run_serve(config_file, props, levels, started, event_loop))
