"""`logbroker console`: the web console (overview, topics and their messages, consumer groups,
ACLs and SCRAM users) for logbroker or any Kafka cluster.

    logbroker console --bootstrap-server localhost:9092            # http://127.0.0.1:9021
    logbroker console --command-config admin.properties --read-only
    logbroker console --schema-registry-url http://localhost:8081   # the Schemas page
    LOGBROKER_CONSOLE_PASSWORD=… logbroker console --host 0.0.0.0 --user ops \\
        --ssl-certfile console.pem --ssl-keyfile console.key

It listens on 127.0.0.1 unless told otherwise; any other address serves the console beyond this
machine, so it needs --user and a password (HTTP basic auth), and no one changes the cluster
unauthenticated; --ssl-certfile serves HTTPS, so that the password does not cross the network in
clear text. The cluster connection takes Kafka client properties (SASL, TLS) from
--command-config, as the other tools do.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import socket
import ssl

import click

from logbroker.cli.common import (
    admin_client,
    bootstrap_option,
    fail,
    load_properties_file,
)

PASSWORD_ENV = "LOGBROKER_CONSOLE_PASSWORD"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_password(password_file: str | None) -> str | None:
    """The console password: the first line of --password-file, else $LOGBROKER_CONSOLE_PASSWORD."""
    if password_file is not None:
        try:
            with open(password_file, encoding="utf-8") as f:
                return f.readline().rstrip("\r\n")
        except OSError as e:
            raise click.BadParameter(f"cannot read {password_file}: {e.strerror or e}",
                                     param_hint="--password-file") from None
    return os.environ.get(PASSWORD_ENV) or None


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@bootstrap_option
@click.option("--command-config", type=click.Path(dir_okay=False),
              help="A properties file of Kafka client configs (security.protocol, sasl.*, ssl.*).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to listen on; any but loopback needs --user and a password.")
@click.option("--port", type=int, default=9021, show_default=True,
              help="The HTTP port (0 picks a free one).")
@click.option("--read-only", is_flag=True, help="Refuse every change to the cluster.")
@click.option("--user", help="Require HTTP basic auth as this user.")
@click.option("--password-file", type=click.Path(dir_okay=False),
              help=f"A file whose first line is the password (else ${PASSWORD_ENV}).")
@click.option("--ssl-certfile", type=click.Path(dir_okay=False),
              help="Serve HTTPS with this PEM certificate (chain).")
@click.option("--ssl-keyfile", type=click.Path(dir_okay=False),
              help="The PEM private key of --ssl-certfile (if not in that file).")
@click.option("--schema-registry-url",
              help="A Confluent-compatible schema registry (e.g. the broker's "
                   "schema.registry.listeners): the Schemas page, and framed values decoded.")
@click.option("--schema-registry-config", type=click.Path(dir_okay=False),
              help="A properties file of schema registry client configs "
                   "(basic.auth.user.info, ssl.ca.location, ...).")
@click.option("--sample-interval", "sample_interval_s", type=float, default=5.0,
              show_default=True, help="Seconds between the throughput and lag samples.")
def console(bootstrap_server: str, command_config: str | None, host: str, port: int,
            read_only: bool, user: str | None, password_file: str | None,
            ssl_certfile: str | None, ssl_keyfile: str | None, schema_registry_url: str | None,
            schema_registry_config: str | None, sample_interval_s: float) -> None:
    """Serve a web console for a Kafka cluster (topics, messages, groups, ACLs)."""
    password = read_password(password_file)
    if password is not None and not user:
        raise click.UsageError("A console password needs --user.")
    if user and not password:
        raise click.UsageError(f"--user needs a password: set ${PASSWORD_ENV} or give "
                               "--password-file.")
    if not is_loopback(host) and not user:
        fail(f"Listening on {host} serves the console beyond this machine: give --user and a "
             f"password (${PASSWORD_ENV} or --password-file) so that no one reaches the "
             "cluster unauthenticated.")
    if sample_interval_s <= 0:
        raise click.BadParameter("must be positive", param_hint="--sample-interval")

    if ssl_keyfile and not ssl_certfile:
        raise click.UsageError("--ssl-keyfile needs --ssl-certfile.")
    if ssl_certfile:
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(
                ssl_certfile, ssl_keyfile)
        except (OSError, ssl.SSLError) as e:
            fail(f"Cannot load the TLS certificate {ssl_certfile}: "
                 f"{getattr(e, 'strerror', None) or getattr(e, 'reason', None) or e}.")

    properties = load_properties_file(command_config, "--command-config")
    registry_config = load_properties_file(schema_registry_config, "--schema-registry-config")
    if registry_config and not schema_registry_url:
        raise click.UsageError("--schema-registry-config needs --schema-registry-url.")
    admin_client(bootstrap_server, command_config)  # fails with one sentence if unreachable

    import uvicorn

    from logbroker.webconsole.app import create_app
    from logbroker.webconsole.cluster import Cluster
    from logbroker.webconsole.guard import Credentials
    from logbroker.webconsole.schemas import SchemaBrowser

    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        listener = socket.create_server((host, port), family=family, backlog=128)
    except OSError as e:
        reason = os.strerror(e.errno) if e.errno else str(e)  # create_server adds the address
        fail(f"Cannot listen on {host}:{port}: {reason}.")
    bound_port = listener.getsockname()[1]
    cluster = Cluster(bootstrap_server, properties)
    app = create_app(cluster, read_only=read_only,
                     credentials=Credentials(user, password) if user else None,
                     sample_interval_s=sample_interval_s,
                     schemas=SchemaBrowser(schema_registry_url, registry_config)
                     if schema_registry_url else None)
    server = _server_class()(uvicorn.Config(app, log_level="warning", access_log=False,
                                            lifespan="on", loop="asyncio",
                                            ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile))

    def stop(signum, frame) -> None:
        server.should_exit = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    shown_host = f"[{host}]" if ":" in host else host
    click.echo(f"logbroker console for {bootstrap_server} listening on "
               f"{'https' if ssl_certfile else 'http'}://{shown_host}:{bound_port}"
               + (" (read-only)" if read_only else "")
               + (f" (basic auth as {user})" if user else ""), err=False)
    try:
        server.run(sockets=[listener])
    finally:
        cluster.close()
    click.echo("logbroker console stopped.")


def _server_class():
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server without its signal handling, which re-raises SIGTERM after shutting
        down (so the process dies by the signal); ours just asks it to stop, and we exit 0."""

        @contextlib.contextmanager
        def capture_signals(self):
            yield

    return Server
