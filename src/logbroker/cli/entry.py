"""The `logbroker` command's entry point: a plain `logbroker serve` goes straight to the broker,
everything else to click (cli/main.py).

Why: click is ~20 ms and ~2 MiB of a broker's start, and starting brokers is what
users, tests and `dev-cluster` do most. This takes only `serve`'s own options — `--config PATH`,
`--override KEY=VALUE`, `--log-level [LOGGER=]LEVEL`, `--event-loop NAME` (else
LOGBROKER_EVENT_LOOP), as `--opt value` or `--opt=value`, with values that parse — and hands
any other command line (`--help`, an unknown option, a missing, malformed or dash-led value, an
unknown loop) to click, which answers with its usual help and errors. So the command behaves as
click alone would; only a broker's start is faster.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

_SERVE_OPTIONS = ("--config", "--override", "--log-level", "--event-loop")


def _serve_options(args: list[str]) -> dict[str, list[str]] | None:
    """`serve`'s options by name, or None when click should read the command line."""
    options: dict[str, list[str]] = {name: [] for name in _SERVE_OPTIONS}
    i = 0
    while i < len(args):
        name, sep, value = args[i].partition("=")
        if name not in options:
            return None
        if not sep:
            if i + 1 == len(args):
                return None
            i += 1
            value = args[i]
        if not value or value.startswith("-"):
            return None
        options[name].append(value)
        i += 1
    return options


def _serve(args: list[str]) -> int | None:
    """Run `logbroker serve ARGS` without click; None when click must (see the module doc)."""
    started = time.monotonic()
    options = _serve_options(args)
    if options is None or len(options["--config"]) > 1 or any(Path(p).is_dir() for p in options["--config"]):
        return None
    from logbroker.cli.run_broker import (EVENT_LOOP_ENV, EVENT_LOOPS, BadArgument, parse_log_levels,
                                          parse_overrides, serve)

    # As click reads --event-loop: the option, else the environment variable (empty is unset).
    loops = options["--event-loop"] or [os.environ.get(EVENT_LOOP_ENV) or "uvloop"]
    if len(loops) > 1 or loops[0] not in EVENT_LOOPS:
        return None
    try:
        levels = parse_log_levels(tuple(options["--log-level"]))
        props = parse_overrides(tuple(options["--override"]))
    except BadArgument:
        return None
    config_file = Path(options["--config"][0]) if options["--config"] else None
    try:
        return serve(config_file, props, levels, started, loops[0])
    except KeyboardInterrupt:  # before the broker's signal handlers are set: as click says it
        print("Aborted!", file=sys.stderr)
        return 1


def main() -> None:
    if sys.argv[1:2] == ["serve"]:
        status = _serve(sys.argv[2:])
        if status is not None:
            sys.exit(status)
    from logbroker.cli.main import main as click_main

    click_main()
