"""The commands the manual shows work: every `logbroker …` line in a code block of README.md or
docs/ is accepted by the CLI as written (its verb and options exist, its values parse), and the
getting-started sequence runs against a real broker and does what the page says."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest

from logbroker.cli.main import main

ROOT = Path(__file__).parent.parent.parent
# The reference pages are generated from the CLI itself (tests/tools/test_reference_docs.py).
PAGES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").rglob("*.md")
                                     if "reference" not in p.parts)]
PREFIXES = ("logbroker ", ".venv/bin/logbroker ")


def documented_commands() -> list[tuple[str, str]]:
    """(page, command line) for each `logbroker` command in a fenced code block, continuation
    lines joined, comments, pipes into it and redirections left out."""
    found = []
    for page in PAGES:
        in_block, pending = False, ""
        for line in page.read_text().splitlines():
            if line.lstrip().startswith("```"):
                in_block, pending = not in_block, ""
                continue
            if not in_block:
                continue
            line = pending + line.strip()
            if line.endswith("\\"):
                pending = line[:-1] + " "
                continue
            pending = ""
            command = line.split(" | ")[-1].split(" #")[0].strip()
            command = command.split("LOGBROKER_CONSOLE_PASSWORD=… ")[-1]
            if command.startswith(PREFIXES):
                found.append((page.relative_to(ROOT).as_posix(), command))
    return found


COMMANDS = documented_commands()


def test_the_manual_shows_commands():
    assert len(COMMANDS) >= 20, COMMANDS


@pytest.mark.parametrize("page,command", COMMANDS, ids=[c for _, c in COMMANDS])
def test_a_documented_command_is_accepted_as_written(page, command):
    rest = shlex.split(command.replace("…", "x"))[1:]
    ctx = click.Context(main, info_name="logbroker")
    verb: click.Command = main
    while isinstance(verb, click.Group):  # `logbroker VERB …`, `logbroker perf produce …`
        name, *rest = rest
        found = verb.get_command(ctx, name)
        assert found is not None, f"{page}: {command!r}: no verb {name!r}"
        ctx, verb = click.Context(found, info_name=name, parent=ctx), found
    try:
        verb.make_context(ctx.info_name, list(rest), parent=ctx.parent)
    except click.UsageError as e:
        pytest.fail(f"{page}: {command!r} is refused: {e.format_message()}")


def test_the_getting_started_sequence_runs(logbroker_process, tmp_path):
    """topics --create, produce, consume, dump-log: as docs/getting-started.md shows them, on a
    broker of its own instead of localhost:9092."""
    broker = logbroker_process
    cli = [sys.executable, "-m", "logbroker.cli"]

    def run(*args: str, stdin: str | None = None) -> str:
        done = subprocess.run([*cli, *args], input=stdin, capture_output=True, text=True,
                              timeout=60, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return done.stdout

    bootstrap = ("--bootstrap-server", broker.bootstrap)
    run("topics", *bootstrap, "--create", "--topic", "events", "--partitions", "3")
    run("produce", *bootstrap, "--topic", "events", stdin="hello\n")
    consumed = run("consume", *bootstrap, "--topic", "events", "--from-beginning",
                   "--max-messages", "1")
    assert consumed.splitlines() == ["hello"]
    segments = [p for p in broker.data_dir.glob("events-*/00000000000000000000.log")
                if p.stat().st_size]
    assert len(segments) == 1
    dumped = run("dump-log", str(segments[0]), "--print-data-log")
    assert "payload: hello" in dumped
