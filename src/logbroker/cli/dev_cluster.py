"""`logbroker dev-cluster`: ZooKeeper and N brokers on loopback, for development, in one command.

    logbroker dev-cluster --brokers 3
    logbroker dev-cluster --brokers 3 --racks a,b,c \
        --override replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector

Starts Apache ZooKeeper (Debian's `zookeeper` package, as tests/cluster do) and N `logbroker serve`
processes with broker ids 1..N, each with its own data directory under `--dir`, prints the
bootstrap servers, and runs until Ctrl-C or SIGTERM. Then it stops the brokers (SIGTERM: a clean
shutdown each) and ZooKeeper, in that order. The data directory is kept, so running it again
brings the same cluster back with its topics.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

import click


@click.command("dev-cluster")
@click.option("--brokers", "count", type=click.IntRange(1, 32), default=3, show_default=True,
              help="How many brokers to start.")
@click.option("--dir", "base_dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("logbroker-dev-cluster"), show_default=True,
              help="Where ZooKeeper's and the brokers' data live (kept between runs).")
@click.option("--port", "first_port", type=click.IntRange(0, 65535), default=9092, show_default=True,
              help="Port of broker 1; broker N listens on PORT+N-1. 0: any free ports.")
@click.option("--racks", default=None, metavar="RACK,RACK,...",
              help="broker.rack of broker 1, 2, … in order (KIP-392 fetch from the closest "
                   "replica, rack-aware assignment); an empty item leaves a broker without.")
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="A broker config key for every broker, as `serve --override`. Repeatable.")
def dev_cluster(count: int, base_dir: Path, first_port: int, racks: str | None,
                overrides: tuple[str, ...]) -> None:
    """Start ZooKeeper and a cluster of brokers on 127.0.0.1; stop them all on Ctrl-C."""
    from logbroker.testing import BrokerProcess, rack_overrides
    from logbroker.zookeeper_process import ZooKeeperProcess, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        click.echo(f"logbroker dev-cluster: cannot start ZooKeeper: {reason}", err=True)
        sys.exit(2)
    extra = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="--override")
        extra[key.strip()] = value.strip()
    per_broker = rack_overrides(racks)
    if racks is not None and len(racks.split(",")) != count:
        raise click.BadParameter(f"expected {count} racks (one per broker), got {racks!r}",
                                 param_hint="--racks")

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())

    base_dir = base_dir.resolve()
    zookeeper = ZooKeeperProcess(base_dir / "zookeeper")
    brokers: list[BrokerProcess] = []
    failed = False
    try:
        zookeeper.start()
        click.echo(f"ZooKeeper on {zookeeper.connect_string} (data in {zookeeper.base_dir})")
        for broker_id in range(1, count + 1):
            port = first_port + broker_id - 1 if first_port else 0
            broker = BrokerProcess(base_dir / f"broker-{broker_id}", overrides={
                "broker.id": str(broker_id), "zookeeper.connect": f"{zookeeper.connect_string}/logbroker",
                "listeners": f"PLAINTEXT://127.0.0.1:{port}", "offsets.topic.replication.factor": "1",
                **extra, **per_broker.get(broker_id, {})})
            brokers.append(broker)
            broker.start()
            rack = per_broker.get(broker_id, {}).get("broker.rack")
            click.echo(f"broker {broker_id} on {broker.bootstrap}{f' in rack {rack}' if rack else ''} "
                       f"(log in {broker.log_path})")
            if stop.is_set():
                break
        if not stop.is_set():
            click.echo(f"bootstrap servers: {','.join(b.bootstrap for b in brokers)}")
            click.echo("Ctrl-C stops the cluster.")
            sys.stdout.flush()
        while not stop.wait(0.5):
            for broker_id, broker in enumerate(brokers, 1):
                if broker.process is not None and broker.process.poll() is not None:
                    click.echo(f"broker {broker_id} exited with {broker.process.returncode}; "
                               f"see {broker.log_path}", err=True)
                    broker.process = None
    except RuntimeError as exc:
        click.echo(f"logbroker dev-cluster: {exc}", err=True)
        failed = True
    finally:
        click.echo("stopping the cluster")
        for broker in reversed(brokers):
            try:
                broker.stop()
            except RuntimeError as exc:
                click.echo(str(exc), err=True)
        zookeeper.stop()
        click.echo("stopped")
    sys.exit(1 if failed else 0)
