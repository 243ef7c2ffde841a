"""How each listener is secured: its security protocol (listener.security.protocol.map) turned
into the ListenerSecurity its connections use — a TLS context for SSL and SASL_SSL, a SASL
authenticator factory for SASL_PLAINTEXT and SASL_SSL — from the ssl.* and sasl.* keys, each
looked up per listener first (`listener.name.<listener>.<key>`); and the client side of the
inter-broker listener, how this broker reaches the others (`inter_broker_security`).

What only TLS or SASL needs (the TLS contexts, the SASL authenticator, the JAAS parser with its
regular expression) is imported in their branches: a PLAINTEXT broker does not load it.
"""

from __future__ import annotations

from collections.abc import Callable

from logbroker.server.config import KafkaConfig
from logbroker.server.config_defs import ConfigError
from logbroker.server.network import PLAINTEXT, ListenerSecurity


def listener_security(config: KafkaConfig, name: str, *, scram_credential: Callable,
                      clock_ms: Callable[[], int], delegation_token: Callable | None = None,
                      wall_clock_ms: Callable[[], int] | None = None) -> ListenerSecurity:
    """Raises ConfigError naming the key when the listener's settings cannot work."""
    protocol = config.listener_security_protocol_map[name]
    if protocol == "PLAINTEXT":
        return PLAINTEXT if name == "PLAINTEXT" else ListenerSecurity(name, protocol)
    get = lambda key: config.listener_value(name, key)  # noqa: E731
    ssl_context = None
    if protocol in ("SSL", "SASL_SSL"):
        from logbroker.server.tls import server_ssl_context
        ssl_context = server_ssl_context(get, name)
    authenticator = None
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        from logbroker.security.jaas import JaasConfigError, plain_users
        from logbroker.server.authenticator import SUPPORTED_MECHANISMS, SaslServerAuthenticator, SaslSettings
        mechanisms = tuple(get("sasl.enabled.mechanisms"))
        if not mechanisms or any(m not in SUPPORTED_MECHANISMS for m in mechanisms):
            raise ConfigError(
                f"Invalid value {','.join(mechanisms)!r} for configuration sasl.enabled.mechanisms "
                f"(listener {name}): logbroker supports {', '.join(SUPPORTED_MECHANISMS)}")
        users: dict[str, str] = {}
        jaas = config.listener_jaas_config(name, "PLAIN") if "PLAIN" in mechanisms else None
        if jaas:
            try:
                users = plain_users(jaas)
            except JaasConfigError as exc:
                raise ConfigError(f"Invalid value for configuration listener.name.{name.lower()}"
                                  f".plain.sasl.jaas.config: {exc}") from None
        settings = SaslSettings(
            listener_name=name, mechanisms=mechanisms, plain_users=users,
            scram_credential=scram_credential,
            failed_authentication_delay_ms=config.connection_failed_authentication_delay_ms,
            reauth_ms=config.connections_max_reauth_ms, clock_ms=clock_ms,
            delegation_token=delegation_token, wall_clock_ms=wall_clock_ms)
        authenticator = lambda peer: SaslServerAuthenticator(settings, peer)  # noqa: E731
    return ListenerSecurity(name, protocol, ssl_context, authenticator,
                            config.sasl_server_max_receive_size)


def inter_broker_security(config: KafkaConfig):
    """The ClientSecurity this broker reaches other brokers with, on inter.broker.listener.name
    (or security.inter.broker.protocol's listener): TLS from that listener's ssl.* keys, SASL with
    sasl.mechanism.inter.broker.protocol and the username/password of the listener's JAAS entry
    for that mechanism. Raises ConfigError naming the key when a SASL listener has no usable
    mechanism or credentials."""
    from logbroker.client import ClientSecurity
    from logbroker.server.authenticator import SUPPORTED_MECHANISMS
    name = config.inter_broker_listener_name
    protocol = config.listener_security_protocol_map[name]
    get = lambda key: config.listener_value(name, key)  # noqa: E731
    ssl_context = None
    if protocol in ("SSL", "SASL_SSL"):
        from logbroker.server.tls import client_ssl_context
        ssl_context = client_ssl_context(get, name)
    if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
        return ClientSecurity(protocol, ssl_context)
    mechanism = config.sasl_mechanism_inter_broker_protocol
    if mechanism not in SUPPORTED_MECHANISMS:
        raise ConfigError(
            f"Invalid value {mechanism!r} for configuration sasl.mechanism.inter.broker.protocol: "
            f"the inter-broker listener {name} is {protocol}; set it to one of "
            f"{', '.join(SUPPORTED_MECHANISMS)}")
    from logbroker.security.jaas import JaasConfigError, parse_jaas
    key = f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config"
    jaas = config.listener_jaas_config(name, mechanism)
    try:
        options = parse_jaas(jaas)[2] if jaas else {}
    except JaasConfigError as exc:
        raise ConfigError(f"Invalid value for configuration {key}: {exc}") from None
    if not options.get("username") or "password" not in options:
        raise ConfigError(f"Configuration {key} (or sasl.jaas.config) needs username and password: "
                          f"the credentials this broker authenticates to other brokers with")
    return ClientSecurity(protocol, ssl_context, mechanism, options["username"], options["password"])
