"""`logbroker configs`: Kafka's kafka-configs.sh (ConfigCommand) with --bootstrap-server — one tool
for topic configs, broker configs, client quotas and SCRAM credentials:

    logbroker configs --bootstrap-server host:9092 --describe --entity-type topics [--entity-name t] [--all]
    logbroker configs --bootstrap-server host:9092 --alter --entity-type topics --entity-name t \\
        --add-config retention.ms=60000,cleanup.policy=[compact,delete] --delete-config segment.ms
    logbroker configs --bootstrap-server host:9092 --describe --entity-type brokers --entity-name 1 --all
    logbroker configs --bootstrap-server host:9092 --alter --entity-type users --entity-name alice \\
        --entity-type clients --entity-default --add-config producer_byte_rate=1048576
    logbroker configs --bootstrap-server host:9092 --alter --entity-type users --entity-name alice \\
        --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'
    logbroker configs --bootstrap-server host:9092 --describe --entity-type users --entity-name alice

Options as Kafka's: --entity-type topics|brokers|users|clients (users and clients together name a
user/client-id entity), --entity-name or --entity-default for each type, in the order given, or
the shortcuts --topic, --broker, --user, --client, --broker-defaults, --user-defaults,
--client-defaults; --add-config k=v[,k=[v1,v2]], --delete-config k[,k]; --command-config for the
client's security properties. Output as kafka-configs.sh prints it.

Topic and broker configs go through DescribeConfigs and IncrementalAlterConfigs, SCRAM credentials
through Describe/AlterUserScramCredentials (confluent-kafka's AdminClient); quotas through
Describe/AlterClientQuotas, which confluent-kafka lacks, with logbroker's own client
(logbroker.client) using the same --command-config.
"""

from __future__ import annotations

import asyncio
import re
import sys

import click

from logbroker.cli.admin_connections import client_security
from logbroker.admin_client import error_sentence
from logbroker.cli.common import admin_client, fail, load_properties_file

ENTITY_TYPES = ("topics", "brokers", "users", "clients")
QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT = ""  # the name an --entity-default stands for, as in ConfigCommand
BROKER_RESOURCE = 4  # ConfigResource.Type.BROKER
_DEFAULT_MARK = "\x00default"

# Kafka's split of --add-config: commas and '=' outside [ ].
_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"
_VERSIONS = {32: 1, 44: 0, 48: 1, 49: 1}  # the request versions this tool sends itself
_SHORTCUTS = {"--topic": "topics", "--broker": "brokers", "--user": "users", "--client": "clients"}
_DEFAULT_SHORTCUTS = {"--broker-defaults": "brokers", "--user-defaults": "users", "--client-defaults": "clients"}


class ConfigCommandError(Exception):
    """An invalid command: its message is printed alone on stderr (ConfigCommand's
    IllegalArgumentException / InvalidConfigurationException)."""


class _OrderedEntities(click.Command):
    """Entity types and names pair up in the order given, --entity-default included, as in
    ConfigCommand: rewrite the shortcuts and --entity-default into --entity-type/--entity-name."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        rewritten: list[str] = []
        items = iter(args)
        for arg in items:
            if arg in _SHORTCUTS:
                rewritten += ["--entity-type", _SHORTCUTS[arg], "--entity-name", next(items, "")]
            elif arg in _DEFAULT_SHORTCUTS:
                rewritten += ["--entity-type", _DEFAULT_SHORTCUTS[arg], "--entity-name", _DEFAULT_MARK]
            elif arg == "--entity-default":
                rewritten += ["--entity-name", _DEFAULT_MARK]
            else:
                rewritten.append(arg)
        return super().parse_args(ctx, rewritten)


def parse_add_config(text: str) -> dict[str, str]:
    """ConfigCommand.parseConfigsToBeAdded: 'k=v,k2=[a,b]' → {k: v, k2: 'a,b'}."""
    configs = {}
    for item in re.split("," + _OUTSIDE_BRACKETS, text):
        pair = re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, item)
        if len(pair) != 2:
            raise ConfigCommandError('Invalid entity config: all configs to be added must be in the format "key=val".')
        configs[pair[0].strip()] = re.sub(r"\[?\]?", "", pair[1]).strip() if "[" in pair[1] or "]" in pair[1] \
            else pair[1].strip()
    return configs


def java_double(value: float) -> str:
    """A double as Java's Double.toString prints it (what kafka-configs shows for quotas)."""
    if value == int(value) and 1e-3 <= abs(value) < 1e7:
        return f"{value:.1f}"
    if 1e-3 <= abs(value) < 1e7 or value == 0:
        return repr(float(value))
    mantissa, exponent = f"{value:.16e}".split("e")
    mantissa = mantissa.rstrip("0")
    if mantissa.endswith("."):
        mantissa += "0"
    return f"{mantissa}E{int(exponent)}"


@click.command(name="configs", cls=_OrderedEntities)
@click.option("--bootstrap-server", "bootstrap_server", required=True, metavar="HOST:PORT[,…]",
              help="The broker(s) to connect to.")
@click.option("--command-config", type=click.Path(dir_okay=False),
              help="Client properties (security.protocol, sasl.*, ssl.*) for the admin client.")
@click.option("--describe", is_flag=True, help="List configs for the given entity.")
@click.option("--alter", is_flag=True, help="Alter the configuration for the entity.")
@click.option("--all", "describe_all", is_flag=True,
              help="List all configs for the given topic or broker, including static and default ones.")
@click.option("--entity-type", "entity_types", multiple=True, metavar="TYPE",
              help="topics, brokers, users or clients (users and clients may go together).")
@click.option("--entity-name", "entity_names", multiple=True, metavar="NAME",
              help="Name of the entity (topic name, broker id, user principal, client id); "
                   "--entity-default instead names the default entity of its type.")
@click.option("--add-config", "add_config", metavar="K=V[,K=[V1,V2]]", help="Configs to add or set.")
@click.option("--add-config-file", type=click.Path(dir_okay=False),
              help="A properties file of configs to add or set (before --add-config).")
@click.option("--delete-config", "delete_configs", multiple=True, metavar="K[,K]", help="Config keys to remove.")
def configs(bootstrap_server, command_config, describe, alter, describe_all, entity_types, entity_names,
            add_config, add_config_file, delete_configs) -> None:
    """Describe or alter topic configs, broker configs, client quotas and SCRAM credentials
    (kafka-configs). Shortcuts: --topic T, --broker B, --user U, --client C, --broker-defaults,
    --user-defaults, --client-defaults."""
    names = [DEFAULT if n == _DEFAULT_MARK else n for n in entity_names]
    try:
        _check(describe, alter, describe_all, list(entity_types), names)
        added = {**load_properties_file(add_config_file, "--add-config-file"),
                 **(parse_add_config(add_config) if add_config else {})}
        deleted = [k.strip() for item in delete_configs for k in item.split(",") if k.strip()]
        command = ConfigCommand(bootstrap_server, command_config)
        if alter:
            command.alter(list(entity_types), names, added, deleted)
        else:
            command.describe(list(entity_types), names, describe_all)
    except ConfigCommandError as exc:
        click.echo(str(exc), err=True)
        sys.exit(1)


def _check(describe: bool, alter: bool, describe_all: bool, types: list[str], names: list[str]) -> None:
    if describe == alter:
        raise ConfigCommandError("Command must include exactly one action: --describe, --alter")
    if not types:
        raise ConfigCommandError("At least one entity type must be specified")
    duplicates = sorted({t for t in types if types.count(t) > 1})
    if duplicates:
        raise ConfigCommandError(f"Duplicate entity type(s) specified: {','.join(duplicates)}")
    for entity_type in types:
        if entity_type not in ENTITY_TYPES:
            raise ConfigCommandError(f"Invalid entity type {entity_type}, the entity type must be one of "
                                     f"{', '.join(ENTITY_TYPES)} with a --bootstrap-server argument")
    if len(types) > 1 and set(types) != {"users", "clients"}:
        raise ConfigCommandError("Only 'users' and 'clients' entity types may be specified together")
    if len(names) > len(types):
        raise ConfigCommandError("More entity names than entity types were given")
    if types[0] == "brokers" and names and names[0] != DEFAULT and not names[0].isdigit():
        raise ConfigCommandError(f"The entity name for brokers must be a valid integer broker id, but it is: {names[0]}")
    if describe_all and types[0] not in ("topics", "brokers"):
        raise ConfigCommandError("--all is only for topics and brokers")
    if alter and len(types) != len(names):
        raise ConfigCommandError("An entity name must be specified for every entity type")
    if describe and types[0] == "topics" and DEFAULT in names:
        raise ConfigCommandError("--entity-default must not be specified with --describe of topics")


class ConfigCommand:
    def __init__(self, bootstrap_server: str, command_config: str | None) -> None:
        self.bootstrap_server = bootstrap_server
        self.command_config = command_config
        self._admin = None

    @property
    def admin(self):
        if self._admin is None:
            self._admin = admin_client(self.bootstrap_server, self.command_config)
        return self._admin

    # -- describe ---------------------------------------------------------------------------------
    def describe(self, types: list[str], names: list[str], describe_all: bool) -> None:
        if types[0] in ("topics", "brokers"):
            self._describe_resources(types[0], names[0] if names else None, describe_all)
            return
        self._describe_quotas(types, names)
        if "clients" not in types and DEFAULT not in names:
            self._describe_scram(names)

    def _describe_resources(self, entity_type: str, name: str | None, describe_all: bool) -> None:
        from confluent_kafka.admin import ConfigResource, ConfigSource
        if name is not None:
            entities = [name]
        elif entity_type == "topics":
            entities = sorted(self._call(lambda: self.admin.list_topics(timeout=30)).topics)
        else:
            cluster = self._call(lambda: self.admin.describe_cluster().result(30))
            entities = [str(n.id) for n in sorted(cluster.nodes, key=lambda n: n.id)] + [DEFAULT]
        resource_type = ConfigResource.Type.TOPIC if entity_type == "topics" else ConfigResource.Type.BROKER
        for entity in entities:
            if entity == DEFAULT:
                click.echo(f"Default configs for {entity_type} in the cluster are:")
                source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
            else:
                click.echo(f"{'All' if describe_all else 'Dynamic'} configs for {entity_type[:-1]} {entity} are:")
                source = ConfigSource.DYNAMIC_TOPIC_CONFIG if entity_type == "topics" \
                    else ConfigSource.DYNAMIC_BROKER_CONFIG
            for entry in self._resource_config(resource_type, entity):
                if not describe_all and entry.source != source.value:
                    continue
                synonyms = ", ".join(f"{ConfigSource(s.source).name}:{s.name}={_shown(s.value)}"
                                     for s in entry.synonyms.values())
                click.echo(f"  {entry.name}={_shown(entry.value)} sensitive={str(entry.is_sensitive).lower()} "
                           f"synonyms={{{synonyms}}}")

    def _resource_config(self, resource_type, name: str) -> list:
        from confluent_kafka.admin import ConfigResource
        if resource_type == ConfigResource.Type.BROKER:
            return self._broker_config(name)
        resource = ConfigResource(resource_type, name)
        futures = self.admin.describe_configs([resource])
        entries = self._call(lambda: futures[resource].result(30))
        return sorted(entries.values(), key=lambda e: e.name)

    def _describe_quotas(self, types: list[str], names: list[str]) -> None:
        components = []
        for i, entity_type in enumerate(types):
            kio_type = "user" if entity_type == "users" else "client-id"
            if i >= len(names):
                components.append({"entity_type": kio_type, "match_type": 2, "match": None})
            elif names[i] == DEFAULT:
                components.append({"entity_type": kio_type, "match_type": 1, "match": None})
            else:
                components.append({"entity_type": kio_type, "match_type": 0, "match": names[i]})
        for entity, values in self._quotas(components):
            parts = []
            for kio_type, label in (("user", "user-principal"), ("client-id", "client-id")):
                if kio_type in entity:
                    parts.append(f"{label} '{entity[kio_type]}'" if entity[kio_type] is not None
                                 else f"the default {label}")
            shown = ", ".join(f"{k}={java_double(v)}" for k, v in values.items())
            click.echo(f"Quota configs for {', '.join(parts)} are {shown}")

    def _describe_scram(self, names: list[str]) -> None:
        try:
            if names:
                futures = self.admin.describe_user_scram_credentials(names)
                descriptions = {}
                for user, future in futures.items():
                    try:
                        descriptions[user] = future.result(timeout=30)
                    except Exception as exc:  # noqa: BLE001 - an unknown user has no credentials
                        if "RESOURCE_NOT_FOUND" not in error_sentence(exc):
                            raise
            else:
                descriptions = self.admin.describe_user_scram_credentials().result(timeout=30)
        except Exception as exc:  # noqa: BLE001
            fail(error_sentence(exc))
        for user, description in sorted(descriptions.items()):
            shown = ", ".join(f"{info.mechanism.name.replace('_', '-')}=iterations={info.iterations}"
                              for info in description.scram_credential_infos)
            click.echo(f"SCRAM credential configs for user-principal '{user}' are {shown}")

    # -- alter --------------------------------------------------------------------------------------
    def alter(self, types: list[str], names: list[str], added: dict[str, str], deleted: list[str]) -> None:
        head_type, head_name = types[0], names[0]
        if head_type == "topics":
            self._alter_resource(head_type, head_name, added, deleted)
        elif head_type == "brokers":
            self._alter_resource(head_type, head_name, added, deleted)
        else:
            self._alter_user_or_client(types, names, added, deleted)
        if head_name:
            click.echo(f"Completed updating config for {head_type[:-1]} {head_name}.")
        else:
            click.echo(f"Completed updating default config for {head_type} in the cluster.")

    def _alter_resource(self, entity_type: str, name: str, added: dict[str, str], deleted: list[str]) -> None:
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource
        resource_type = ConfigResource.Type.TOPIC if entity_type == "topics" else ConfigResource.Type.BROKER
        dynamic = {ConfigSource.DYNAMIC_TOPIC_CONFIG.value, ConfigSource.DYNAMIC_BROKER_CONFIG.value,
                   ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value}
        current = {e.name for e in self._resource_config(resource_type, name) if e.source in dynamic}
        invalid = [k for k in deleted if k not in current]
        if invalid:
            raise ConfigCommandError(f"Invalid config(s): {','.join(invalid)}")
        if name == DEFAULT:
            self._alter_default_broker_config(added, deleted)
            return
        entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in added.items()]
        entries += [ConfigEntry(k, "", incremental_operation=AlterConfigOpType.DELETE) for k in deleted]
        resource = ConfigResource(resource_type, name, incremental_configs=entries)
        futures = self.admin.incremental_alter_configs([resource])
        self._call(lambda: futures[resource].result(60))

    def _alter_user_or_client(self, types: list[str], names: list[str], added: dict[str, str],
                              deleted: list[str]) -> None:
        quota_add = [k for k in added if k in QUOTA_KEYS]
        scram_add = [k for k in added if k in SCRAM_MECHANISMS]
        unknown_add = [k for k in added if k not in QUOTA_KEYS and k not in SCRAM_MECHANISMS]
        quota_delete = [k for k in deleted if k in QUOTA_KEYS]
        scram_delete = [k for k in deleted if k in SCRAM_MECHANISMS]
        unknown_delete = [k for k in deleted if k not in QUOTA_KEYS and k not in SCRAM_MECHANISMS]
        if types[0] == "clients" or len(types) == 2:
            if unknown_add or scram_add:
                raise ConfigCommandError(f"Only quota configs can be added for 'clients' using --bootstrap-server. "
                                         f"Unexpected config names: {_scala_list(unknown_add + scram_add)}")
            if unknown_delete or scram_delete:
                raise ConfigCommandError(f"Only quota configs can be deleted for 'clients' using --bootstrap-server. "
                                         f"Unexpected config names: {_scala_list(unknown_delete + scram_delete)}")
        else:
            if unknown_add:
                raise ConfigCommandError(f"Only quota and SCRAM credential configs can be added for 'users' using "
                                         f"--bootstrap-server. Unexpected config names: {_scala_list(unknown_add)}")
            if unknown_delete:
                raise ConfigCommandError(f"Only quota and SCRAM credential configs can be deleted for 'users' using "
                                         f"--bootstrap-server. Unexpected config names: {_scala_list(unknown_delete)}")
            if scram_add or scram_delete:
                if DEFAULT in names:
                    raise ConfigCommandError("The use of --entity-default or --user-defaults is not allowed with "
                                             "User SCRAM Credentials using --bootstrap-server.")
                if quota_add or quota_delete:
                    raise ConfigCommandError("Cannot alter both quota and SCRAM credential configs simultaneously "
                                             "for 'users' using --bootstrap-server.")
        if quota_add or quota_delete:
            self._alter_quotas(types, names, {k: added[k] for k in quota_add}, quota_delete)
        else:
            self._alter_scram(names[0], {k: added[k] for k in scram_add}, scram_delete)

    def _alter_quotas(self, types: list[str], names: list[str], added: dict[str, str], deleted: list[str]) -> None:
        entity = [{"entity_type": "user" if t == "users" else "client-id", "entity_name": n or None}
                  for t, n in zip(types, names)]
        components = [{"entity_type": e["entity_type"], "match_type": 0 if e["entity_name"] else 1,
                       "match": e["entity_name"]} for e in entity]
        current = next((values for _, values in self._quotas(components)), {})
        invalid = [k for k in deleted if k not in current]
        if invalid:
            raise ConfigCommandError(f"Invalid config(s): {','.join(invalid)}")
        ops = []
        for key, text in added.items():
            try:
                ops.append({"key": key, "value": float(text), "remove": False})
            except ValueError:
                raise ConfigCommandError(f"Cannot parse quota configuration value for {key}: {text}") from None
        ops += [{"key": key, "value": 0.0, "remove": True} for key in deleted]
        response = self._request(49, {"validate_only": False, "entries": [{"entity": entity, "ops": ops}]})
        [result] = response.entries
        if int(result.error_code):
            self._failed(int(result.error_code), result.error_message)

    def _alter_scram(self, user: str, added: dict[str, str], deleted: list[str]) -> None:
        from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                           UserScramCredentialUpsertion)
        mechanism_of = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256, "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}
        alterations = [UserScramCredentialDeletion(user, mechanism_of[m]) for m in deleted]
        for mechanism, text in added.items():
            match = re.fullmatch(r"(?:iterations=(-?[0-9]*),)?password=(.*)", text)
            if match is None:
                raise ConfigCommandError(f"Invalid credential property {mechanism}={text}")
            iterations = int(match[1]) if match[1] and match[1] != "-1" else 4096
            if iterations < 4096:
                raise ConfigCommandError(f"Iterations {iterations} is less than the minimum 4096 required for {mechanism}")
            alterations.append(UserScramCredentialUpsertion(
                user, ScramCredentialInfo(mechanism_of[mechanism], iterations), match[2].encode()))
        futures = self.admin.alter_user_scram_credentials(alterations)
        for future in futures.values():
            self._call(lambda f=future: f.result(60))

    def _broker_config(self, name: str) -> list:
        """A broker's configs (asked of that broker) or the cluster default's, with logbroker's own
        client: confluent-kafka cannot name the default, and keeps one synonym per name where Kafka
        lists each layer (DYNAMIC_BROKER_CONFIG:message.max.bytes=…, DEFAULT_CONFIG:message.max.bytes=…)."""
        servers = self.bootstrap_server if name == DEFAULT else self._broker_address(name)
        response = self._request(32, {"include_synonyms": True, "resources": [
            {"resource_type": BROKER_RESOURCE, "resource_name": name, "configuration_keys": None}]},
            servers=servers)
        [result] = response.results
        if int(result.error_code):
            self._failed(int(result.error_code), result.error_message)
        return sorted((_Entry(c.name, c.value, int(c.config_source), c.is_sensitive,
                              {(y.source, y.name): _Entry(y.name, y.value, int(y.source), False, {}) for y in c.synonyms})
                       for c in result.configs), key=lambda e: e.name)

    def _broker_address(self, broker_id: str) -> str:
        cluster = self._call(lambda: self.admin.describe_cluster().result(30))
        node = next((n for n in cluster.nodes if str(n.id) == broker_id), None)
        return f"{node.host}:{node.port}" if node is not None else self.bootstrap_server

    def _alter_default_broker_config(self, added: dict[str, str], deleted: list[str]) -> None:
        response = self._request(44, {"validate_only": False, "resources": [{
            "resource_type": BROKER_RESOURCE, "resource_name": DEFAULT,
            "configs": [{"name": k, "config_operation": 0, "value": v} for k, v in added.items()]
            + [{"name": k, "config_operation": 1, "value": None} for k in deleted]}]})
        [result] = response.responses
        if int(result.error_code):
            self._failed(int(result.error_code), result.error_message)

    # -- transport --------------------------------------------------------------------------------
    def _call(self, fn):
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - one sentence, as the other tools
            fail(error_sentence(exc))

    def _quotas(self, components: list[dict]) -> list[tuple[dict, dict[str, float]]]:
        response = self._request(48, {"strict": True, "components": components})
        if int(response.error_code):
            self._failed(int(response.error_code), response.error_message)
        found = []
        for entry in response.entries or ():
            entity = {e.entity_type: e.entity_name for e in entry.entity}
            found.append((entity, {v.key: v.value for v in entry.values}))
        return sorted(found, key=lambda item: [(t, n or "") for t, n in sorted(item[0].items())])

    def _request(self, api_key: int, fields: dict, *, servers: str | None = None):
        """One request to the first of `servers` (default: --bootstrap-server) that answers."""
        from kio.index import load_request_schema

        from logbroker.client import ConnectionClosedError, KafkaConnection
        from logbroker.server.responses import build

        security = client_security(load_properties_file(self.command_config, "--command-config"))
        body = build(load_request_schema(api_key, _VERSIONS[api_key]), fields)
        errors = []
        for address in (servers or self.bootstrap_server).split(","):
            host, _, port = address.strip().rpartition(":")

            async def round_trip():
                connection = KafkaConnection(host.strip("[]"), int(port), client_id="logbroker-configs",
                                             security=security)
                try:
                    return await connection.request(body)
                finally:
                    await connection.close()
            try:
                return asyncio.run(round_trip())
            except (ConnectionClosedError, OSError, ValueError) as exc:
                errors.append(f"{address}: {exc}")
        fail(f"Cannot reach a broker at {servers or self.bootstrap_server}: {'; '.join(errors)}.")

    @staticmethod
    def _failed(code: int, message: str | None) -> None:
        from logbroker.errors import BY_CODE
        name = BY_CODE[code].name if code in BY_CODE else str(code)
        fail(f"{(message or name).rstrip('.')} ({name}).")


class _Entry:
    """A config entry read with logbroker's own client, shaped like confluent-kafka's ConfigEntry."""

    def __init__(self, name: str, value, source: int, is_sensitive: bool, synonyms: dict) -> None:
        self.name, self.value, self.source = name, value, source
        self.is_sensitive, self.synonyms = is_sensitive, synonyms


def _shown(value) -> str:
    return "null" if value is None else str(value)


def _scala_list(items: list[str]) -> str:
    return f"List({', '.join(items)})"
