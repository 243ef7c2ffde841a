"""`logbroker schemas`: the schema registry a broker serves (`schema.registry.listeners`), or any
Confluent-compatible registry, from the command line.

    logbroker schemas subjects [--deleted] [--prefix orders]
    logbroker schemas versions orders-value [--deleted]
    logbroker schemas show orders-value [--version 2 | --version latest]
    logbroker schemas show --id 7
    logbroker schemas register orders-value --schema order.avsc [--type PROTOBUF] [--references refs.json]
    logbroker schemas check orders-value --schema order-v2.avsc [--version latest]
    logbroker schemas delete orders-value [--version 3] [--permanent]
    logbroker schemas config [orders-value] [--set FULL_TRANSITIVE] [--normalize/--no-normalize] [--delete]
    logbroker schemas mode [orders-value] [--set READONLY|READWRITE|IMPORT] [--force] [--delete]

The registry is --url (else $SCHEMA_REGISTRY_URL, else http://127.0.0.1:8081); on a broker with
SASL users give --user-info USER:PASSWORD (else $SCHEMA_REGISTRY_USER_INFO, the Confluent clients'
basic.auth.user.info) and, for https with a private CA, --ca-file. An error from the registry is
printed as its message with Confluent's error code, exit status 1.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote, urlencode

import click

from logbroker.cli.common import fail, table

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryClient:
    def __init__(self, url: str, user_info: str | None, ca_file: str | None) -> None:
        self.url = url.rstrip("/")
        self.headers = {"Accept": CONTENT_TYPE, "Content-Type": CONTENT_TYPE}
        if user_info:
            self.headers["Authorization"] = "Basic " + base64.b64encode(user_info.encode()).decode()
        self.context = ssl.create_default_context(cafile=ca_file) if ca_file else None

    def call(self, method: str, path: str, body: object = None, **query) -> object:
        """The decoded answer; exits with the registry's message on an error status."""
        params = {k: str(v).lower() if isinstance(v, bool) else v for k, v in query.items() if v not in (None, False)}
        url = self.url + path + (f"?{urlencode(params)}" if params else "")
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method, headers=self.headers)
        try:
            with urllib.request.urlopen(request, timeout=30, context=self.context) as response:
                payload = response.read()
        except urllib.error.HTTPError as exc:
            payload = exc.read()
            try:
                error = json.loads(payload)
                fail(f"{error['message']} (error code {error['error_code']}, HTTP {exc.code})")
            except (ValueError, KeyError, TypeError):
                fail(f"The registry at {self.url} answered HTTP {exc.code}")
        except (OSError, urllib.error.URLError) as exc:
            fail(f"Cannot reach the schema registry at {self.url}: {getattr(exc, 'reason', exc)}")
        return json.loads(payload) if payload else None


def _subject(subject: str) -> str:
    return quote(subject, safe="")


def _read_schema(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise click.BadParameter(f"cannot read {path}: {exc.strerror or exc}", param_hint="--schema") from None


def _schema_body(schema_file: str, schema_type: str, references_file: str | None) -> dict:
    body: dict = {"schema": _read_schema(schema_file)}
    if schema_type != "AVRO":
        body["schemaType"] = schema_type
    if references_file:
        try:
            body["references"] = json.loads(Path(references_file).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise click.BadParameter(f"{references_file}: {exc}", param_hint="--references") from None
    return body


def _echo_json(value: object) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--url", envvar="SCHEMA_REGISTRY_URL", default="http://127.0.0.1:8081", show_default=True,
              help="The schema registry's URL (env SCHEMA_REGISTRY_URL).")
@click.option("--user-info", envvar="SCHEMA_REGISTRY_USER_INFO", metavar="USER:PASSWORD",
              help="HTTP basic auth credentials (env SCHEMA_REGISTRY_USER_INFO).")
@click.option("--ca-file", type=click.Path(dir_okay=False), help="PEM CA certificates for an https registry.")
@click.pass_context
def schemas(ctx: click.Context, url: str, user_info: str | None, ca_file: str | None) -> None:
    """List, show, register, check and delete schemas; set compatibility and mode."""
    ctx.obj = RegistryClient(url, user_info, ca_file)


@schemas.command()
@click.option("--deleted", is_flag=True, help="Include soft-deleted subjects.")
@click.option("--prefix", default="", help="Only subjects starting with this.")
@click.pass_obj
def subjects(client: RegistryClient, deleted: bool, prefix: str) -> None:
    """List the subjects."""
    for subject in client.call("GET", "/subjects", deleted=deleted, subjectPrefix=prefix or None):
        click.echo(subject)


@schemas.command()
@click.argument("subject")
@click.option("--deleted", is_flag=True, help="Include soft-deleted versions.")
@click.pass_obj
def versions(client: RegistryClient, subject: str, deleted: bool) -> None:
    """List a subject's versions with their ids and types."""
    rows = []
    for version in client.call("GET", f"/subjects/{_subject(subject)}/versions", deleted=deleted):
        schema = client.call("GET", f"/subjects/{_subject(subject)}/versions/{version}", deleted=deleted)
        rows.append((version, schema["id"], schema.get("schemaType", "AVRO"), len(schema.get("references", []))))
    click.echo(table(("VERSION", "ID", "TYPE", "REFERENCES"), rows))


@schemas.command()
@click.argument("subject", required=False)
@click.option("--version", default="latest", show_default=True, help="A version number or latest.")
@click.option("--id", "schema_id", type=int, help="Show the schema with this id instead of a subject's.")
@click.pass_obj
def show(client: RegistryClient, subject: str | None, version: str, schema_id: int | None) -> None:
    """Show a subject's version (or the schema of an id)."""
    if (subject is None) == (schema_id is None):
        raise click.UsageError("Give a SUBJECT or --id.")
    if schema_id is not None:
        _echo_json(client.call("GET", f"/schemas/ids/{schema_id}"))
    else:
        _echo_json(client.call("GET", f"/subjects/{_subject(subject)}/versions/{quote(version, safe='')}"))


_schema_options = [
    click.option("--schema", "schema_file", required=True, type=click.Path(dir_okay=False),
                 help="The file holding the schema (.avsc, .proto, .json)."),
    click.option("--type", "schema_type", type=click.Choice(["AVRO", "PROTOBUF", "JSON"], case_sensitive=False),
                 default="AVRO", show_default=True),
    click.option("--references", "references_file", type=click.Path(dir_okay=False),
                 help='A JSON file: [{"name": …, "subject": …, "version": …}, …].'),
    click.option("--normalize", is_flag=True, help="Normalize the schema first."),
]


def schema_options(function):
    for option in reversed(_schema_options):
        function = option(function)
    return function


@schemas.command()
@click.argument("subject")
@schema_options
@click.pass_obj
def register(client: RegistryClient, subject: str, schema_file: str, schema_type: str,
             references_file: str | None, normalize: bool) -> None:
    """Register a schema under a subject (prints its id; the same schema again keeps its id)."""
    body = _schema_body(schema_file, schema_type.upper(), references_file)
    answer = client.call("POST", f"/subjects/{_subject(subject)}/versions", body, normalize=normalize)
    click.echo(f"Registered {subject}: id {answer['id']}")


@schemas.command()
@click.argument("subject")
@schema_options
@click.option("--version", help="Check against this version only (default: as the subject's level says).")
@click.pass_obj
def check(client: RegistryClient, subject: str, schema_file: str, schema_type: str, references_file: str | None,
          normalize: bool, version: str | None) -> None:
    """Check a schema's compatibility with a subject (exit status 1 when incompatible)."""
    body = _schema_body(schema_file, schema_type.upper(), references_file)
    path = f"/compatibility/subjects/{_subject(subject)}/versions" + (f"/{quote(version, safe='')}" if version else "")
    answer = client.call("POST", path, body, verbose=True, normalize=normalize)
    if answer["is_compatible"]:
        click.echo("Compatible")
        return
    click.echo("Incompatible:")
    for message in answer.get("messages", []):
        click.echo(f"  {message}")
    raise SystemExit(1)


@schemas.command()
@click.argument("subject")
@click.option("--version", help="Delete only this version (a number or latest).")
@click.option("--permanent", is_flag=True, help="Hard delete (what was soft-deleted before).")
@click.pass_obj
def delete(client: RegistryClient, subject: str, version: str | None, permanent: bool) -> None:
    """Delete a subject or one of its versions (soft unless --permanent)."""
    kind = "Permanently deleted" if permanent else "Deleted"
    if version:
        deleted = client.call("DELETE", f"/subjects/{_subject(subject)}/versions/{quote(version, safe='')}",
                              permanent=permanent)
        click.echo(f"{kind} {subject} version {deleted}")
    else:
        deleted = client.call("DELETE", f"/subjects/{_subject(subject)}", permanent=permanent)
        click.echo(f"{kind} {subject} versions {', '.join(map(str, deleted))}")


@schemas.command()
@click.argument("subject", required=False)
@click.option("--set", "level", help="Set the compatibility level (NONE, BACKWARD, …, FULL_TRANSITIVE).")
@click.option("--normalize/--no-normalize", default=None, help="Set whether schemas are normalized.")
@click.option("--delete", "remove", is_flag=True, help="Remove the subject's (or the global) setting.")
@click.pass_obj
def config(client: RegistryClient, subject: str | None, level: str | None, normalize: bool | None,
           remove: bool) -> None:
    """Show or set the compatibility level, globally or for a subject."""
    path = "/config" + (f"/{_subject(subject)}" if subject else "")
    if remove:
        client.call("DELETE", path)
        click.echo(f"Removed the compatibility setting of {subject or 'the registry'}")
    elif level or normalize is not None:
        body = {k: v for k, v in (("compatibility", level and level.upper()), ("normalize", normalize)) if v is not None}
        _echo_json(client.call("PUT", path, body))
    else:
        _echo_json(client.call("GET", path, defaultToGlobal=bool(subject)))


@schemas.command()
@click.argument("subject", required=False)
@click.option("--set", "mode", type=click.Choice(["READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT"],
                                                 case_sensitive=False), help="Set the mode.")
@click.option("--force", is_flag=True, help="IMPORT even though schemas exist.")
@click.option("--delete", "remove", is_flag=True, help="Remove the subject's mode.")
@click.pass_obj
def mode(client: RegistryClient, subject: str | None, mode: str | None, force: bool, remove: bool) -> None:
    """Show or set the mode, globally or for a subject."""
    path = "/mode" + (f"/{_subject(subject)}" if subject else "")
    if remove:
        if not subject:
            raise click.UsageError("--delete needs a SUBJECT.")
        client.call("DELETE", path)
        click.echo(f"Removed the mode of {subject}")
    elif mode:
        _echo_json(client.call("PUT", path, {"mode": mode.upper()}, force=force))
    else:
        _echo_json(client.call("GET", path, defaultToGlobal=bool(subject)))
