"""`logbroker delegation-tokens`: create, renew, expire and describe delegation tokens, like
Kafka's kafka-delegation-tokens.sh (same options, same output).

    logbroker delegation-tokens --bootstrap-server host:9092 --command-config admin.properties \\
        --create --max-life-time-period -1 --renewer-principal User:bob [--owner-principal User:carol]
    logbroker delegation-tokens … --renew --hmac <base64 HMAC> --renew-time-period -1
    logbroker delegation-tokens … --expire --hmac <base64 HMAC> --expiry-time-period -1
    logbroker delegation-tokens … --describe [--owner-principal User:alice …]

Tokens are only handed out over authenticated connections, so --command-config names SASL (or
mTLS) client properties. A client then authenticates with SCRAM, user name the token id and
password the HMAC, and `tokenauth="true"` in its ScramLoginModule JAAS options.

No Python Kafka client has these admin calls, so the tool speaks the protocol itself
(logbroker.client), CreateDelegationToken v3, Renew/Expire v2, Describe v3.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import struct

import click

from logbroker.cli.admin_connections import AdminConnections, client_security, run_admin
from logbroker.cli.common import fail, load_properties_file


def _principal(text: str) -> tuple[str, str]:
    kind, sep, name = text.partition(":")
    if not sep or not name:
        raise click.BadParameter(f"expected a principal as Type:name (User:alice), got {text!r}")
    return kind, name


def _date(ms: int) -> str:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M%z")


def _ms(value) -> int:
    return int(value.timestamp() * 1000) if isinstance(value, datetime.datetime) else int(value)


@click.command(name="delegation-tokens")
@click.option("--bootstrap-server", required=True, metavar="HOST:PORT[,…]")
@click.option("--command-config", required=True, type=click.Path(dir_okay=False),
              help="Client properties of an authenticated connection (security.protocol, sasl.*, ssl.*).")
@click.option("--create", is_flag=True, help="Create a token.")
@click.option("--renew", is_flag=True, help="Renew the token of --hmac.")
@click.option("--expire", is_flag=True, help="Expire the token of --hmac.")
@click.option("--describe", is_flag=True, help="Describe tokens.")
@click.option("--max-life-time-period", type=int, default=-1, show_default=True,
              help="With --create: the token's maximum lifetime in ms (-1: the broker's).")
@click.option("--renewer-principal", "renewers", multiple=True, metavar="User:NAME",
              help="With --create: who else may renew the token; repeatable.")
@click.option("--owner-principal", "owners", multiple=True, metavar="User:NAME",
              help="With --create: the owner (default: you). With --describe: whose tokens; repeatable.")
@click.option("--hmac", "token_hmac", metavar="BASE64", help="The token to renew or expire.")
@click.option("--renew-time-period", type=int, default=-1, show_default=True,
              help="With --renew: ms from now (-1: the broker's delegation.token.expiry.time.ms).")
@click.option("--expiry-time-period", type=int, default=-1, show_default=True,
              help="With --expire: ms from now (-1: at once).")
def delegation_tokens(bootstrap_server, command_config, create, renew, expire, describe,
                      max_life_time_period, renewers, owners, token_hmac, renew_time_period,
                      expiry_time_period) -> None:
    """Create, renew, expire and describe delegation tokens (kafka-delegation-tokens)."""
    if [create, renew, expire, describe].count(True) != 1:
        fail("Command must include exactly one action: --create, --renew, --expire or --describe")
    try:
        renewer_principals = [_principal(r) for r in renewers]
        owner_principals = [_principal(o) for o in owners]
    except click.BadParameter as exc:
        fail(exc.message)
    hmac_bytes = b""
    if renew or expire:
        if not token_hmac:
            fail("--hmac is required with --renew and --expire")
        try:
            hmac_bytes = base64.b64decode(token_hmac, validate=True)
        except binascii.Error:
            fail("--hmac must be the token's HMAC in base64, as --create printed it")
    if create and len(owner_principals) > 1:
        fail("--create takes at most one --owner-principal")
    security = client_security(load_properties_file(command_config, "--command-config"))

    async def work(admin: AdminConnections) -> None:
        if create:
            await _create(admin, renewer_principals, owner_principals, max_life_time_period)
        elif renew or expire:
            await _change_expiry(admin, renew=renew, token_hmac=token_hmac, hmac_bytes=hmac_bytes,
                                 period_ms=renew_time_period if renew else expiry_time_period)
        else:
            await _describe(admin, owner_principals)

    run_admin(bootstrap_server, lambda: AdminConnections(bootstrap_server, security,
                                                         client_id="kafka-delegation-tokens"), work)


async def _request(admin: AdminConnections, body):
    """The decoded response, or one line and exit 1 on an error (a failed answer's -1 timestamps
    are Kafka's, which kio's reader refuses, so the error code is read first)."""
    from logbroker.client import decode_response
    from logbroker.errors import error_name

    frame = await admin._bootstrap.request_frame(body)
    code = struct.unpack_from(">h", frame, 5)[0]  # correlation id, header tagged fields, error_code
    if code:
        fail(f"{type(body).__name__.removesuffix('Request')} failed: {error_name(code)}")
    return decode_response(frame, api_key=type(body).__api_key__, api_version=type(body).__version__)[1]


async def _change_expiry(admin, *, renew: bool, token_hmac: str, hmac_bytes: bytes, period_ms: int) -> None:
    """--renew (RenewDelegationToken v2) or --expire (ExpireDelegationToken v2)."""
    period = datetime.timedelta(milliseconds=period_ms)
    if renew:
        from kio.schema.renew_delegation_token.v2.request import RenewDelegationTokenRequest
        operation, body = "renew", RenewDelegationTokenRequest(hmac=hmac_bytes, renew_period=period)
    else:
        from kio.schema.expire_delegation_token.v2.request import ExpireDelegationTokenRequest
        operation, body = "expire", ExpireDelegationTokenRequest(hmac=hmac_bytes, expiry_time_period=period)
    click.echo(f"Calling {operation} token operation with hmac :{token_hmac} , {operation}-time-period :{period_ms}")
    response = await _request(admin, body)
    click.echo(f"Completed {operation} operation. New expiry date : {_date(_ms(response.expiry_timestamp))}")


async def _create(admin, renewers, owners, max_life_time_period) -> None:
    from kio.schema.create_delegation_token.v3.request import CreatableRenewers, CreateDelegationTokenRequest

    shown = "[" + ", ".join(f"{k}:{n}" for k, n in renewers) + "]"
    click.echo(f"Calling create token operation with renewers :{shown} , "
               f"max-life-time-period :{max_life_time_period}")
    owner = owners[0] if owners else (None, None)
    response = await _request(admin, CreateDelegationTokenRequest(
        owner_principal_type=owner[0], owner_principal_name=owner[1],
        renewers=tuple(CreatableRenewers(principal_type=k, principal_name=n) for k, n in renewers),
        max_lifetime=datetime.timedelta(milliseconds=max_life_time_period)))
    click.echo(f"Created delegation token with tokenId : {response.token_id}")
    _print_tokens([{
        "token_id": response.token_id, "hmac": response.hmac,
        "owner": f"{response.principal_type}:{response.principal_name}",
        "requester": f"{response.token_requester_principal_type}:{response.token_requester_principal_name}",
        "renewers": [f"{k}:{n}" for k, n in renewers],
        "issue": _ms(response.issue_timestamp), "expiry": _ms(response.expiry_timestamp),
        "max": _ms(response.max_timestamp)}])


async def _describe(admin, owners) -> None:
    from kio.schema.describe_delegation_token.v3.request import (DescribeDelegationTokenOwner,
                                                                 DescribeDelegationTokenRequest)
    click.echo("Calling describe token operation for current user." if not owners else
               f"Calling describe token operation for owners :[{', '.join(f'{k}:{n}' for k, n in owners)}]")
    response = await _request(admin, DescribeDelegationTokenRequest(owners=tuple(
        DescribeDelegationTokenOwner(principal_type=k, principal_name=n) for k, n in owners) or None))
    click.echo(f"Total number of tokens : {len(response.tokens)}")
    _print_tokens([{
        "token_id": t.token_id, "hmac": t.hmac, "owner": f"{t.principal_type}:{t.principal_name}",
        "requester": f"{t.token_requester_principal_type}:{t.token_requester_principal_name}",
        "renewers": [f"{r.principal_type}:{r.principal_name}" for r in t.renewers],
        "issue": t.issue_timestamp, "expiry": t.expiry_timestamp, "max": t.max_timestamp}
        for t in response.tokens])


def _print_tokens(tokens: list[dict]) -> None:
    """Kafka's table: TOKENID HMAC OWNER REQUESTER RENEWERS ISSUEDATE EXPIRYDATE MAXDATE."""
    click.echo()
    click.echo(f"{'TOKENID':<15}{'HMAC':<30}{'OWNER':<15}{'REQUESTER':<15}{'RENEWERS':<20}"
               f"{'ISSUEDATE':<20}{'EXPIRYDATE':<20}{'MAXDATE':<20}")
    for t in tokens:
        click.echo(f"{t['token_id']:<15} {base64.b64encode(t['hmac']).decode():<30} {t['owner']:<15} "
                   f"{t['requester']:<15} {'[' + ', '.join(t['renewers']) + ']':<20} {_date(t['issue']):<20} "
                   f"{_date(t['expiry']):<20} {_date(t['max']):<20}")
