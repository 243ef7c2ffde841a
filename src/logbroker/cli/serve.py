"""`logbroker serve`: start a broker — with no arguments, the embedded default on 127.0.0.1:9092."""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from pathlib import Path

import click

DEFAULT_DATA_DIR = "logbroker-data"


def parse_overrides(values: tuple[str, ...]) -> dict[str, str]:
    overrides = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--override")
        overrides[key.strip()] = value.strip()
    return overrides


def configure_logging(level: str = "INFO") -> None:
    """Kafka's log4j layout: `[date time,ms] LEVEL message (logger)`, one line per event."""
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), stream=sys.stderr,
                        format="[%(asctime)s,%(msecs)03d] %(levelname)s %(message)s (%(name)s)",
                        datefmt="%Y-%m-%d %H:%M:%S")
    logging.addLevelName(logging.WARNING, "WARN")


@click.command()
@click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
              help="A Kafka server.properties file.")
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Set a broker config key, as kafka-server-start.sh --override does. Repeatable.")
@click.option("--log-level", default="INFO", show_default=True, help="Root log level.")
def serve(config_file: Path | None, overrides: tuple[str, ...], log_level: str) -> None:
    """Start a broker. With no arguments: 127.0.0.1:9092, data in ./logbroker-data."""
    started = time.monotonic()
    configure_logging(log_level)
    from logbroker.server.config import ConfigError, KafkaConfig

    props = parse_overrides(overrides)
    try:
        if config_file is not None:
            if not config_file.is_file():
                raise ConfigError(f"Config file {config_file} does not exist; pass the path of a server.properties file.")
            config = KafkaConfig.from_file(config_file, props)
        else:
            config = KafkaConfig.from_props(props)
        if not config.log_dirs_configured:
            config = config.with_log_dirs([str(Path(DEFAULT_DATA_DIR).resolve())])
    except ConfigError as exc:
        click.echo(f"logbroker: {exc}", err=True)
        sys.exit(2)
    sys.exit(asyncio.run(_run(config, started)))


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
    log.info("[KafkaServer id=%d] started in %d ms: listening on %s, log dirs %s, cluster id %s",
             broker.broker_id, (time.monotonic() - started) * 1000, listeners,
             ",".join(str(d) for d in broker.log_dirs), broker.cluster_id)
    await broker.serve_until_signalled()
    return 0
