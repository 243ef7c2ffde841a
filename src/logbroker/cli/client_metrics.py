"""`logbroker client-metrics`: client-metrics subscriptions (KIP-714), like Kafka's
kafka-client-metrics.sh (same options, same output).

    logbroker client-metrics --bootstrap-server host:9092 --list
    logbroker client-metrics --bootstrap-server host:9092 --describe [--name N]
    logbroker client-metrics --bootstrap-server host:9092 --alter --name producers \\
        --metrics org.apache.kafka.producer. --interval 60000 --match client_software_name=librdkafka
    logbroker client-metrics --bootstrap-server host:9092 --delete --name producers

Through ListConfigResources, DescribeConfigs and IncrementalAlterConfigs on CLIENT_METRICS config
resources (type 16), which no Python client's admin offers: the tool speaks the protocol itself.
"""

from __future__ import annotations

import uuid

import click

from logbroker.cli.admin_connections import AdminConnections, client_security, run_admin
from logbroker.cli.common import fail, load_properties_file

CLIENT_METRICS = 16
SET, DELETE = 0, 1
KEYS = ("interval.ms", "match", "metrics")


@click.command(name="client-metrics")
@click.option("--bootstrap-server", required=True, metavar="HOST:PORT[,…]")
@click.option("--command-config", type=click.Path(dir_okay=False),
              help="Client properties (security.protocol, sasl.*, ssl.*).")
@click.option("--list", "list_", is_flag=True, help="List the subscriptions.")
@click.option("--describe", is_flag=True, help="Describe one (--name) or every subscription.")
@click.option("--alter", is_flag=True, help="Create or change the subscription --name.")
@click.option("--delete", is_flag=True, help="Delete the subscription --name.")
@click.option("--name", help="The subscription.")
@click.option("--generate-name", is_flag=True, help="With --alter: a new subscription with a random name.")
@click.option("--metrics", help="With --alter: comma-separated metric name prefixes (* for all).")
@click.option("--interval", type=int, help="With --alter: the push interval in ms.")
@click.option("--match", help="With --alter: comma-separated selector=regex pairs.")
def client_metrics(bootstrap_server, command_config, list_, describe, alter, delete, name, generate_name,
                   metrics, interval, match) -> None:
    """Manage client-metrics subscriptions (kafka-client-metrics)."""
    if [list_, describe, alter, delete].count(True) != 1:
        fail("Command must include exactly one action: --list, --describe, --alter or --delete")
    if generate_name:
        if not alter or name:
            fail("--generate-name goes with --alter and without --name")
        name = str(uuid.uuid4())
    if (alter or delete) and not name:
        fail("--name (or --generate-name with --alter) is required")
    if alter and metrics is None and interval is None and match is None:
        fail("--alter needs at least one of --metrics, --interval and --match")
    properties = load_properties_file(command_config, "--command-config") if command_config else {}
    security = client_security(properties)

    async def work(admin: AdminConnections) -> None:
        if list_:
            for resource_name in await _names(admin):
                click.echo(resource_name)
        elif describe:
            await _describe(admin, [name] if name else await _names(admin))
        elif alter:
            values = {"metrics": metrics, "interval.ms": None if interval is None else str(interval), "match": match}
            await _alter(admin, name, [(key, SET, value) for key, value in values.items() if value is not None])
            click.echo(f"Altered client metrics config for {name}.")
        else:
            await _alter(admin, name, [(key, DELETE, None) for key in KEYS])
            click.echo(f"Deleted client metrics config for {name}.")

    run_admin(bootstrap_server, lambda: AdminConnections(bootstrap_server, security,
                                                         client_id="kafka-client-metrics"), work)


async def _names(admin: AdminConnections) -> list[str]:
    from kio.schema.list_config_resources.v1.request import ListConfigResourcesRequest
    response = await admin._bootstrap.request(ListConfigResourcesRequest(resource_types=(CLIENT_METRICS,)))
    _check(response.error_code, "ListConfigResources")
    return sorted(r.resource_name for r in response.config_resources)


async def _describe(admin: AdminConnections, names: list[str]) -> None:
    from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
    response = await admin._bootstrap.request(DescribeConfigsRequest(resources=tuple(
        DescribeConfigsResource(resource_type=CLIENT_METRICS, resource_name=n, configuration_keys=None)
        for n in names)))
    for result in response.results:
        _check(result.error_code, f"DescribeConfigs of {result.resource_name}", result.error_message)
        click.echo(f"Client metrics configs for {result.resource_name} are:")
        for entry in result.configs:
            click.echo(f"  {entry.name}={entry.value or ''}")


async def _alter(admin: AdminConnections, name: str, operations) -> None:
    from kio.schema.incremental_alter_configs.v1.request import (AlterableConfig, AlterConfigsResource,
                                                                 IncrementalAlterConfigsRequest)
    response = await admin._bootstrap.request(IncrementalAlterConfigsRequest(resources=(AlterConfigsResource(
        resource_type=CLIENT_METRICS, resource_name=name,
        configs=tuple(AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in operations)),),
        validate_only=False))
    for result in response.responses:
        _check(result.error_code, f"Altering client metrics config for {name}", result.error_message)


def _check(code, what: str, message: str | None = None) -> None:
    from logbroker.errors import error_name
    if code:
        fail(f"{what} failed: {error_name(int(code))}{': ' + message if message else ''}")
