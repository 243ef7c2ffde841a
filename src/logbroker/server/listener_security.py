"""How each listener is secured: its security protocol (listener.security.protocol.map) turned
into the ListenerSecurity its connections use — a TLS context for SSL and SASL_SSL, a SASL
authenticator factory for SASL_PLAINTEXT and SASL_SSL — from the ssl.* and sasl.* keys, each
looked up per listener first (`listener.name.<listener>.<key>`).
"""

from __future__ import annotations

from collections.abc import Callable

from logbroker.security.jaas import JaasConfigError, plain_users
from logbroker.server.config import KafkaConfig
from logbroker.server.config_defs import ConfigError
from logbroker.server.network import PLAINTEXT, ListenerSecurity


def listener_security(config: KafkaConfig, name: str, *, scram_credential: Callable,
                      clock_ms: Callable[[], int]) -> ListenerSecurity:
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
            reauth_ms=config.connections_max_reauth_ms, clock_ms=clock_ms)
        authenticator = lambda peer: SaslServerAuthenticator(settings, peer)  # noqa: E731
    return ListenerSecurity(name, protocol, ssl_context, authenticator,
                            config.sasl_server_max_receive_size)
