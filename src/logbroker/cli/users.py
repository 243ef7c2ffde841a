"""`logbroker users`: SCRAM credentials, like `kafka-configs --entity-type users`.

Before the broker starts (writes the metadata store in the first log dir of the config — or, when
the config sets zookeeper.connect, /config/users/<name> in ZooKeeper, as Kafka's ZooKeeper-era
`kafka-configs --zookeeper … --alter` does):

    logbroker users --config server.properties --add-scram 'SCRAM-SHA-256=[name=admin,password=s3cret]'
    logbroker users --zookeeper zk1:2181/kafka --add-scram 'SCRAM-SHA-256=[name=admin,password=s3cret]'

Through a running broker (AlterUserScramCredentials / DescribeUserScramCredentials):

    logbroker users --bootstrap-server host:9092 --command-config admin.properties \\
        --alter --add-scram 'SCRAM-SHA-512=[name=alice,iterations=8192,password=pw]'
    logbroker users --bootstrap-server host:9092 --alter --delete-scram 'SCRAM-SHA-512=[name=alice]'
    logbroker users --bootstrap-server host:9092 --describe [--entity-name alice]

A mechanism's options are name (or --entity-name), password (for --add-scram) and iterations
(default 4096). Several mechanisms: 'SCRAM-SHA-256=[…],SCRAM-SHA-512=[…]'.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import click

from logbroker.admin_client import client_config, error_sentence
from logbroker.cli.common import fail, load_properties_file

_ENTRY = re.compile(r"\s*(SCRAM-SHA-(?:256|512))=\[([^\]]*)\]\s*(?:,|$)")


def parse_scram_spec(text: str, entity_name: str | None, *, need_password: bool) -> list[tuple[str, str, dict]]:
    """'SCRAM-SHA-256=[name=a,password=p],…' → [(mechanism, user, options)]."""
    entries, pos = [], 0
    text = text.strip()
    while pos < len(text):
        match = _ENTRY.match(text, pos)
        if match is None:
            raise click.BadParameter(f"expected MECHANISM=[key=value,…] with MECHANISM SCRAM-SHA-256 "
                                     f"or SCRAM-SHA-512, at {text[pos:][:40]!r}")
        options = {}
        for item in filter(None, (i.strip() for i in match[2].split(","))):
            key, sep, value = item.partition("=")
            if not sep:
                raise click.BadParameter(f"expected key=value inside [], got {item!r}")
            options[key.strip()] = value
        user = options.pop("name", None) or entity_name
        if not user:
            raise click.BadParameter(f"{match[1]}: no user (name=… inside [] or --entity-name)")
        if need_password and not options.get("password"):
            raise click.BadParameter(f"{match[1]}: no password=…")
        if "iterations" in options and not options["iterations"].isdigit():
            raise click.BadParameter(f"{match[1]}: iterations must be a number")
        entries.append((match[1], user, options))
        pos = match.end()
    if not entries:
        raise click.BadParameter("no SCRAM mechanism given")
    return entries


@click.command(name="users")
@click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
              help="server.properties: change the store in its first log dir (broker not running).")
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="With --config: a config override, as for serve.")
@click.option("--zookeeper", "zookeeper_connect", metavar="HOST:PORT[,…][/CHROOT]",
              help="A cluster's ZooKeeper: change /config/users directly (brokers may be running).")
@click.option("--bootstrap-server", "bootstrap_server", metavar="HOST:PORT[,…]",
              help="A running broker to change or describe credentials through.")
@click.option("--command-config", type=click.Path(dir_okay=False),
              help="Client properties (security.protocol, sasl.*, ssl.*) for --bootstrap-server.")
@click.option("--alter", is_flag=True, help="Add or delete credentials (with --bootstrap-server).")
@click.option("--describe", is_flag=True, help="List users and their SCRAM mechanisms.")
@click.option("--add-scram", "add_scram", multiple=True, metavar="SPEC",
              help="MECHANISM=[name=…,password=…,iterations=…]; repeatable.")
@click.option("--delete-scram", "delete_scram", multiple=True, metavar="SPEC",
              help="MECHANISM=[name=…]; repeatable.")
@click.option("--entity-name", help="The user, when SPEC has no name=.")
def users(config_file, overrides, zookeeper_connect, bootstrap_server, command_config, alter, describe,
          add_scram, delete_scram, entity_name) -> None:
    """Manage SCRAM users (kafka-configs --entity-type users)."""
    try:
        adds = [e for spec in add_scram for e in parse_scram_spec(spec, entity_name, need_password=True)]
        deletes = [e for spec in delete_scram for e in parse_scram_spec(spec, entity_name, need_password=False)]
    except click.BadParameter as exc:
        raise click.BadParameter(exc.message, param_hint="--add-scram/--delete-scram") from None
    if [config_file, zookeeper_connect, bootstrap_server].count(None) != 2:
        fail("Give exactly one of --config (broker stopped), --zookeeper (a cluster's ZooKeeper) and "
             "--bootstrap-server (broker running).")
    if config_file is not None:
        _offline(config_file, overrides, adds, deletes, describe)
    elif zookeeper_connect is not None:
        with _zookeeper_store(zookeeper_connect) as store:
            _change_store(store, adds, deletes, describe, where=f"ZooKeeper {zookeeper_connect}")
    elif describe:
        _describe(bootstrap_server, command_config, entity_name)
    elif alter or adds or deletes:
        if not (adds or deletes):
            fail("--alter needs --add-scram or --delete-scram.")
        _alter(bootstrap_server, command_config, adds, deletes)
    else:
        fail("Nothing to do: give --describe, or --alter with --add-scram/--delete-scram.")


def _offline(config_file, overrides, adds, deletes, describe) -> None:
    from logbroker.metadata.local_store import LocalMetadataStore
    from logbroker.server.config import ConfigError, KafkaConfig

    try:
        config = KafkaConfig.from_file(config_file, list(overrides), log_warnings=False)
    except ConfigError as exc:
        fail(str(exc))
    if config.zookeeper_connect:
        with _zookeeper_store(config.zookeeper_connect) as store:
            _change_store(store, adds, deletes, describe, where=f"ZooKeeper {config.zookeeper_connect}")
        return
    if not config.log_dirs:
        fail(f"{config_file} sets neither log.dirs nor log.dir.")
    log_dir = Path(config.log_dirs[0])
    log_dir.mkdir(parents=True, exist_ok=True)
    store = LocalMetadataStore(log_dir)
    _change_store(store, adds, deletes, describe, where=str(store.path))


@contextlib.contextmanager
def _zookeeper_store(connect: str):
    """The SCRAM users of the cluster whose `zookeeper.connect` is `connect`, loaded."""
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError

    from logbroker.metadata import zk_data
    from logbroker.metadata.zk_users import USERS, ZkUserScramStore
    from logbroker.metadata.zookeeper_store import ensure_chroot

    client = KazooClient(hosts=connect)
    try:
        ensure_chroot(connect, timeout_s=15)
        client.start(timeout=15)
    except KazooTimeoutError:
        fail(f"Cannot connect to ZooKeeper at {connect} within 15 s; check --zookeeper (or zookeeper.connect).")
    try:
        client.ensure_path(USERS)
        client.ensure_path(zk_data.CONFIG_CHANGES)
        store = ZkUserScramStore(client)
        store.read_all()
        yield store
    finally:
        client.stop()
        client.close()


def _change_store(store, adds, deletes, describe, *, where: str) -> None:
    """Apply --add-scram/--delete-scram to a store (file or ZooKeeper), then --describe it."""
    from logbroker.security.scram import DEFAULT_ITERATIONS, MAX_ITERATIONS, MIN_ITERATIONS, ScramFormatter

    for mechanism, user, options in adds:
        iterations = int(options.get("iterations", DEFAULT_ITERATIONS))
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            fail(f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}.")
        store.set_scram_credential(user, mechanism, ScramFormatter(mechanism).credential(
            options["password"], iterations=iterations))
        click.echo(f"Added {mechanism} credential for user {user} in {where}")
    for mechanism, user, _ in deletes:
        if store.scram_credential(user, mechanism) is None:
            fail(f"User {user} has no {mechanism} credential.")
        store.delete_scram_credential(user, mechanism)
        click.echo(f"Deleted {mechanism} credential of user {user}")
    if describe:
        for user, mechanisms in sorted(store.scram_users().items()):
            _echo_user(user, [(m, c.iterations) for m, c in sorted(mechanisms.items())])


def _echo_user(user: str, infos) -> None:
    shown = ",".join(f"{m}=iterations={i}" for m, i in infos)
    click.echo(f"SCRAM credential configs for user-principal '{user}' are {shown}")


def _admin(bootstrap_server, command_config):
    from confluent_kafka.admin import AdminClient
    return AdminClient(client_config(bootstrap_server,
                                     load_properties_file(command_config, "--command-config")))


def _alter(bootstrap_server, command_config, adds, deletes) -> None:
    from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                       UserScramCredentialUpsertion)
    mechanism_of = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256, "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}
    alterations = [UserScramCredentialUpsertion(
        user, ScramCredentialInfo(mechanism_of[m], int(o.get("iterations", 4096))), o["password"].encode())
        for m, user, o in adds]
    alterations += [UserScramCredentialDeletion(user, mechanism_of[m]) for m, user, _ in deletes]
    failed = False
    admin = _admin(bootstrap_server, command_config)  # kept alive until the futures resolve
    for user, future in admin.alter_user_scram_credentials(alterations).items():
        try:
            future.result(timeout=30)
            click.echo(f"Completed updating SCRAM credentials for user {user}.")
        except Exception as exc:  # noqa: BLE001 - reported per user
            click.echo(f"Error: user {user}: {error_sentence(exc)}", err=True)
            failed = True
    if failed:
        raise SystemExit(1)


def _describe(bootstrap_server, command_config, entity_name) -> None:
    admin = _admin(bootstrap_server, command_config)
    try:
        if entity_name:
            descriptions = {u: f.result(timeout=30) for u, f in
                            admin.describe_user_scram_credentials([entity_name]).items()}
        else:
            descriptions = admin.describe_user_scram_credentials().result(timeout=30)
    except Exception as exc:  # noqa: BLE001
        fail(error_sentence(exc))
    for user, description in sorted(descriptions.items()):
        _echo_user(user, [(info.mechanism.name.replace("_", "-"), info.iterations)
                          for info in description.scram_credential_infos])
