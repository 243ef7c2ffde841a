"""Running a broker in this process, as `logbroker serve` does: logging in Kafka's layout, the
config, then the broker until SIGTERM or SIGINT.

No click here: a plain `logbroker serve` comes straight from cli/entry.py without importing it
(click is ~20 ms of a start); cli/serve.py is the click command, for `--help` and the errors of a malformed
command line. Both parse with the functions below, so they accept and refuse the same things.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

DEFAULT_DATA_DIR = "logbroker-data"
EVENT_LOOPS = ("uvloop", "asyncio")
EVENT_LOOP_ENV = "LOGBROKER_EVENT_LOOP"


class BadArgument(ValueError):
    """A malformed option value; `option` is the flag it was given to (click's param hint)."""

    def __init__(self, message: str, option: str) -> None:
        super().__init__(message)
        self.option = option


def parse_overrides(values: tuple[str, ...]) -> dict[str, str]:
    overrides = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise BadArgument(f"expected KEY=VALUE, got {item!r}", "--override")
        overrides[key.strip()] = value.strip()
    return overrides


LEVELS = {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
          "WARNING": logging.WARNING, "ERROR": logging.ERROR, "FATAL": logging.CRITICAL, "OFF": logging.CRITICAL + 10}


def parse_log_levels(levels: tuple[str, ...]) -> tuple[int, dict[str, int]]:
    """`levels` are `LEVEL` for the root logger or `LOGGER=LEVEL` for one component, with log4j's
    logger names where Kafka has them (kafka.request.logger, kafka.log.LogManager, …): the root
    level (INFO unless given) and the level of each named logger."""
    root, per_logger = logging.INFO, {}
    for item in levels:
        name, sep, level = item.rpartition("=")
        value = LEVELS.get(level.strip().upper())
        if value is None:
            raise BadArgument(f"unknown level {level!r} in {item!r}; use one of {', '.join(LEVELS)}", "--log-level")
        if sep:
            per_logger[name.strip()] = value
        else:
            root = value
    return root, per_logger


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


class OneLineFormatter(logging.Formatter):
    """One event, one line: control characters in a message (a group id, client id or topic name
    from a client may hold a newline) are written escaped, so no client can forge a log line such
    as `[…] ERROR …`. Tracebacks, added after the message, keep their lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        line = super().formatMessage(record)
        return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), line) \
            if _CONTROL.search(line) else line


def configure_logging(root: int = logging.INFO, per_logger: dict[str, int] | None = None) -> None:
    """Kafka's log4j layout: `[date time,ms] LEVEL message (logger)`, one line per event."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(OneLineFormatter("[%(asctime)s,%(msecs)03d] %(levelname)s %(message)s (%(name)s)",
                                          datefmt="%Y-%m-%d %H:%M:%S"))
    logging.basicConfig(level=root, handlers=[handler])
    logging.addLevelName(logging.WARNING, "WARN")
    for name, value in (per_logger or {}).items():
        logging.getLogger(name).setLevel(value)


def _hide_hypothesis() -> None:
    """kio registers a hypothesis strategy for each of its types whenever hypothesis is importable
    (our test extra installs it): +80 ms to start and +8 MiB resident in a broker that never uses
    them. A broker process imports kio only after this, so kio sees hypothesis as absent."""
    if "hypothesis" not in sys.modules:
        sys.modules["hypothesis"] = None


def serve(config_file: Path | None, overrides: dict[str, str], log_levels: tuple[int, dict[str, int]],
          started: float, event_loop: str = "uvloop") -> int:
    """Run a broker until signalled on `event_loop` (one of EVENT_LOOPS); the exit status (2: a
    config error, 1: startup failed). `started` is time.monotonic() when the command began, for
    the "started in" line."""
    _hide_hypothesis()
    configure_logging(*log_levels)
    from logbroker.server.config import ConfigError, KafkaConfig

    try:
        if config_file is not None:
            if not config_file.is_file():
                raise ConfigError(f"Config file {config_file} does not exist; pass the path of a server.properties file.")
            config = KafkaConfig.from_file(config_file, overrides)
        else:
            config = KafkaConfig.from_props(overrides)
        if not config.log_dirs_configured:
            config = config.with_log_dirs([str(Path(DEFAULT_DATA_DIR).resolve())])
    except ConfigError as exc:
        print(f"logbroker: {exc}", file=sys.stderr, flush=True)
        return 2
    with asyncio.Runner(loop_factory=loop_factory(event_loop)) as runner:
        return runner.run(_run(config, started))


def loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory of the event loop called `name` (one of EVENT_LOOPS); None is asyncio's default.

    What the broker may assume of either loop: a transport with write-buffer high-water mark 0
    calls pause_writing within the write that buffers (network.py's sendfile relies on it);
    timers may fire up to ~1.5 ms early by a fine clock (uvloop keeps milliseconds and rounds
    delays), so a timer callback must not re-check the clock and give up; and an I/O callback
    may run before or after a callback queued with call_soon just before the bytes arrived
    (uvloop reads within the same iteration, asyncio one iteration later), so nothing may
    depend on how many requests of a client's fit between two hops of a background task."""
    if name == "uvloop":
        import uvloop

        return uvloop.new_event_loop
    return None


def running_event_loop() -> str:
    """The name, in EVENT_LOOPS, of the event loop running this coroutine's thread."""
    return "uvloop" if type(asyncio.get_running_loop()).__module__.startswith("uvloop") else "asyncio"


async def _run(config, started: float) -> int:
    from logbroker.errors import KafkaError
    from logbroker.server.broker import Broker

    log = logging.getLogger("kafka.server.KafkaServer")
    broker = Broker(config)
    try:
        await broker.start()
    except (KafkaError, OSError) as exc:
        log.error("Startup failed: %s", exc)
        await broker.shutdown()
        return 1
    listeners = ", ".join(f"{l.name}://{l.host}:{l.port}" for l in broker.listeners)
    log.info("[KafkaServer id=%d] started in %d ms: listening on %s, log dirs %s, cluster id %s, event loop %s",
             broker.broker_id, (time.monotonic() - started) * 1000, listeners,
             ",".join(str(d) for d in broker.log_dirs), broker.cluster_id, running_event_loop())
    # What startup built (modules, schemas, loaded logs) lives as long as the process: moved out
    # of the collector's generations, it is no longer traversed by every full collection (which
    # otherwise walks ~60k objects and evicts a request's working set from the caches).
    gc.freeze()
    return await broker.serve_until_signalled()
