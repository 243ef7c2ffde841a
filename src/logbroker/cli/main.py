"""The `logbroker` command: one click group, each verb in its own module, imported on use."""

from __future__ import annotations

import importlib

import click

# verb → (module, attribute). Imported only when the verb runs, so `logbroker --help` and
# `logbroker serve` do not pay for the imports of every other tool.
COMMANDS = {
    "serve": ("logbroker.cli.serve", "serve"),
    "dump-log": ("logbroker.cli.dump_log", "dump_log"),
    "topics": ("logbroker.cli.topics", "topics"),
    "produce": ("logbroker.cli.console", "produce"),
    "consume": ("logbroker.cli.console", "consume"),
    "console": ("logbroker.cli.web_console", "console"),
    "perf": ("logbroker.cli.perf", "perf"),
    "status": ("logbroker.cli.status", "status"),
    "groups": ("logbroker.cli.groups", "groups"),
    "share-groups": ("logbroker.cli.share_groups", "share_groups"),
    "transactions": ("logbroker.cli.transactions", "transactions"),
    "users": ("logbroker.cli.users", "users"),
    "delegation-tokens": ("logbroker.cli.delegation_tokens", "delegation_tokens"),
    "client-metrics": ("logbroker.cli.client_metrics", "client_metrics"),
    "configs": ("logbroker.cli.configs", "configs"),
    "acls": ("logbroker.cli.acls", "acls"),
    "schemas": ("logbroker.cli.schemas", "schemas"),
    "dev-cluster": ("logbroker.cli.dev_cluster", "dev_cluster"),
    "leader-election": ("logbroker.cli.leader_election", "leader_election"),
    "reassign-partitions": ("logbroker.cli.reassign_partitions", "reassign_partitions"),
    "restore-topic": ("logbroker.cli.restore_topic", "restore_topic"),
    "log-dirs": ("logbroker.cli.log_dirs", "log_dirs"),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, attribute = target
        return getattr(importlib.import_module(module), attribute)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """logbroker: a Kafka-compatible broker, and Kafka's tools to use it."""
