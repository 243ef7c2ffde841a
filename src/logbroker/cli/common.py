"""What the Kafka-style tools share on top of logbroker.admin_client: `--bootstrap-server`,
`key=value` options, the one action a command takes, tables, failing with one sentence, and the
progress display.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import NoReturn

import click

from logbroker.admin_client import client_config, error_sentence, unreachable

DEFAULT_BOOTSTRAP = "localhost:9092"


def bootstrap_option(function):
    return click.option("--bootstrap-server", "bootstrap_server", default=DEFAULT_BOOTSTRAP,
                        show_default=True, metavar="HOST:PORT[,…]",
                        help="The broker(s) to connect to.")(function)


def parse_key_values(items: Iterable[str], option: str) -> dict[str, str]:
    """`key=value` strings → dict; the value may itself contain '='."""
    result = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected key=value, got {item!r}", param_hint=option)
        result[key.strip()] = value
    return result


def load_properties_file(path: str | None, option: str) -> dict[str, str]:
    """A client `.properties` file (`--producer.config`, `--command-config`, …), or {}."""
    if path is None:
        return {}
    from logbroker.server import properties
    try:
        return properties.load(path)
    except OSError as e:
        raise click.BadParameter(f"cannot read {path}: {e.strerror or e}", param_hint=option) from None
    except properties.PropertiesFormatError as e:
        raise click.BadParameter(f"cannot parse {path}: {e}", param_hint=option) from None


def one_action(given: Mapping[str, bool], *, usage: str) -> str:
    """The one action flag a command was given (the key of the only true value in `given`);
    click.UsageError "Command must include exactly one action: <usage>" for none or several."""
    actions = [name for name, on in given.items() if on]
    if len(actions) != 1:
        raise click.UsageError(f"Command must include exactly one action: {usage}")
    return actions[0]


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], *, tabbed: bool = False) -> str:
    """Rows under headers, each column left-aligned to its widest cell. Two layouts of Kafka's
    tools: cells two spaces apart with the line's trailing blanks dropped (kafka-share-groups.sh,
    the default), or `tabbed`, each cell padded and followed by a tab (kafka-transactions.sh,
    TransactionsCommand.prettyPrintTable)."""
    lines = [tuple(str(cell) for cell in row) for row in (headers, *rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    if tabbed:
        return "\n".join("".join(cell.ljust(w) + "\t" for cell, w in zip(line, widths)) for line in lines)
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines)


def fail(message: str, exit_code: int = 1) -> NoReturn:
    """Print `Error: …` on stderr and exit."""
    click.echo(f"Error: {message}", err=True)
    sys.exit(exit_code)


def fail_with(error: object, bootstrap: str, *, what: str | None = None) -> NoReturn:
    """Exit with one sentence for a client error; a cluster that cannot be reached says so."""
    if unreachable(error, bootstrap):
        fail(f"Cannot reach a broker at {bootstrap}: {error_sentence(error)}")
    fail(f"{what}: {error_sentence(error)}" if what else error_sentence(error))


def admin_client(bootstrap_server: str, command_config: str | None):
    """An AdminClient for the tools that take `--bootstrap-server` and `--command-config`,
    failing with one sentence when its config is invalid or no broker answers."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    config = client_config(bootstrap_server, load_properties_file(command_config, "--command-config"))
    try:
        admin = AdminClient(config)
    except (KafkaException, ValueError) as e:
        fail(f"Invalid admin client config: {error_sentence(e)}")
    ensure_reachable(admin, config)
    return admin


def ensure_reachable(client, config: Mapping[str, object], timeout_s: float = 10.0) -> None:
    """Fail at once when no broker answers (librdkafka says all brokers are down, or metadata
    does not come within `timeout_s`), rather than when the first record times out."""
    from confluent_kafka import KafkaError, KafkaException

    bootstrap = str(config["bootstrap.servers"])
    errors = config.get("error_cb")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            client.list_topics(timeout=0.25)
            return
        except KafkaException as e:
            if time.monotonic() >= deadline:
                fail_with(e, bootstrap)
        client.poll(0)  # serves error_cb
        for error in getattr(errors, "errors", ()):
            if error.code() in (KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE,
                                KafkaError._AUTHENTICATION):
                fail_with(error, bootstrap)


class VariadicOptionCommand(click.Command):
    """A click command where some options take every value up to the next option, as Kafka's
    argparse tools do: `--producer-props acks=1 linger.ms=5` means the option twice."""

    def __init__(self, *args, variadic: Iterable[str] = (), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.variadic = frozenset(variadic)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        rewritten: list[str] = []
        current: str | None = None  # the variadic option whose values are being read
        first = False
        for arg in args:
            if arg.startswith("-"):
                current, first = (arg, True) if arg in self.variadic else (None, False)
                rewritten.append(arg)
            elif current is not None:
                rewritten += [arg] if first else [current, arg]
                first = False
            else:
                rewritten.append(arg)
        return super().parse_args(ctx, rewritten)


class Progress:
    """Periodic report lines, and a rich progress bar under them when stdout is a terminal.

    Report lines always go to stdout, one per call, so piping a tool's output gives exactly the
    lines Kafka's tool prints; the bar exists only on a TTY and disappears when done.
    """

    def __init__(self, total: int | None, description: str) -> None:
        self.total = total
        self.description = description
        self._progress = None
        self._task = None

    def __enter__(self) -> Progress:
        if sys.stdout.isatty():
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress as RichProgress,
                                       TaskProgressColumn, TextColumn, TimeElapsedColumn)
            self._progress = RichProgress(TextColumn("{task.description}"), BarColumn(),
                                          MofNCompleteColumn(), TaskProgressColumn(),
                                          TimeElapsedColumn(), transient=True)
            self._progress.__enter__()
            self._task = self._progress.add_task(self.description, total=self.total)
        return self

    def __exit__(self, *exc_info) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc_info)
            self._progress = None

    def line(self, text: str) -> None:
        if self._progress is not None:
            self._progress.console.print(text, markup=False, highlight=False, soft_wrap=True)
        else:
            click.echo(text)
            sys.stdout.flush()

    def update(self, completed: int) -> None:
        if self._progress is not None:
            self._progress.update(self._task, completed=completed)
