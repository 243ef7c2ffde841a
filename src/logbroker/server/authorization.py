"""What the API handlers check, and with whom: the connection's principal and host against the
broker's AclAuthorizer (`broker.authorizer`, None when `authorizer.class.name` is empty).

With no authorizer every check is one attribute test and allows; handlers on the hot paths test
`broker.authorizer is None` themselves before calling in here. The operations each API checks are
Kafka 3.9's (KafkaApis): handlers call `allowed`, `allowed_names` or `require_cluster` with them.
"""

from __future__ import annotations

import functools

from logbroker.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from logbroker.protocol.apis import ApiKey
from logbroker.security.acl import CLUSTER_NAME, SUPPORTED_OPERATIONS, AclOperation, ResourceType
from logbroker.security.authorizer import AUTHORIZER_CLASSES, AclAuthorizer, parse_super_users
from logbroker.security.principal import ANONYMOUS
from logbroker.server.config_defs import ConfigError

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
CONFIG_RESOURCE_TOPIC = 2  # ConfigResource.Type.TOPIC in the config APIs
CONFIG_RESOURCE_GROUP = 32  # ConfigResource.Type.GROUP (Kafka 4's group configs)


def create_authorizer(config) -> AclAuthorizer | None:
    """The authorizer `authorizer.class.name` names (its ACLs not yet loaded), or None when it is
    empty. Kafka's ZooKeeper-era AclAuthorizer and KRaft's StandardAuthorizer are the same ACL
    authorizer here; any other class is a startup error naming the key."""
    name = (config.authorizer_class_name or "").strip()
    if not name:
        return None
    if name not in AUTHORIZER_CLASSES:
        raise ConfigError(f"Invalid value {name!r} for configuration authorizer.class.name: "
                          f"logbroker implements only {' and '.join(AUTHORIZER_CLASSES)} (the same "
                          f"ACL authorizer) or none (empty)")
    return AclAuthorizer(super_users=parse_super_users(config.super_users),
                         allow_everyone_if_no_acl_found=config.allow_everyone_if_no_acl_found)


def client_host(request) -> str:
    """The client's IP address, as ACL hosts name it."""
    peer = request.connection.peer if request.connection is not None else "?"
    return peer.rsplit(":", 1)[0] if ":" in peer else peer


def principal(request) -> str:
    return request.connection.principal if request.connection is not None else ANONYMOUS


@functools.cache
def request_name(api_key: int) -> str:
    """Kafka's name of an API as its audit log prints it: OFFSET_COMMIT → OffsetCommit."""
    try:
        return "".join(w.capitalize() for w in ApiKey(api_key).name.split("_"))
    except ValueError:
        return str(api_key)


def allowed(broker, request, operation: AclOperation, resource_type: ResourceType, name: str, *,
            log_denied: bool = True) -> bool:
    authorizer = broker.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize(principal(request), client_host(request), operation, resource_type,
                                name, request_name=request_name(request.api_key),
                                log_denied=log_denied)


def allowed_names(broker, request, operation: AclOperation, resource_type: ResourceType,
                  names, *, log_denied: bool = True) -> set[str]:
    """The distinct names among `names` the operation is allowed on (each checked once)."""
    unique = set(names)
    if broker.authorizer is None:
        return unique
    return {n for n in unique if allowed(broker, request, operation, resource_type, n,
                                         log_denied=log_denied)}


def cluster_allowed(broker, request, operation: AclOperation, *, log_denied: bool = True) -> bool:
    return allowed(broker, request, operation, CLUSTER, CLUSTER_NAME, log_denied=log_denied)


def require_cluster(broker, request, operation: AclOperation) -> None:
    """Raise CLUSTER_AUTHORIZATION_FAILED unless `operation` on the cluster is allowed."""
    if not cluster_allowed(broker, request, operation):
        raise ClusterAuthorizationFailedError(
            f"{principal(request)} is not authorized for {operation.kafka_name} on the cluster; "
            f"ask an administrator for an ACL (logbroker acls --add --cluster).")


def require_topic(broker, request, operation: AclOperation, name: str) -> None:
    """Raise TOPIC_AUTHORIZATION_FAILED unless `operation` on the topic is allowed."""
    if broker.authorizer is not None and not allowed(broker, request, operation, TOPIC, name):
        raise TopicAuthorizationFailedError(
            f"{principal(request)} is not authorized for {operation.kafka_name} on topic {name}.")


def require_group(broker, request, operation: AclOperation, group_id: str) -> None:
    """Raise GROUP_AUTHORIZATION_FAILED unless `operation` on the group is allowed."""
    if broker.authorizer is not None and not allowed(broker, request, operation, GROUP, group_id):
        raise GroupAuthorizationFailedError(
            f"{principal(request)} is not authorized for {operation.kafka_name} on group {group_id}.")


def require_transactional_id(broker, request, operation: AclOperation, transactional_id: str) -> None:
    """Raise TRANSACTIONAL_ID_AUTHORIZATION_FAILED unless `operation` on the id is allowed."""
    if broker.authorizer is not None and not allowed(broker, request, operation, ResourceType.TRANSACTIONAL_ID,
                                                     transactional_id):
        raise TransactionalIdAuthorizationFailedError(
            f"{principal(request)} is not authorized for {operation.kafka_name} on transactional id "
            f"{transactional_id}.")


def may_create_topic(broker, request, name: str) -> bool:
    """CREATE on the cluster, or else on the topic (Kafka checks both, in that order)."""
    return cluster_allowed(broker, request, AclOperation.CREATE, log_denied=False) \
        or allowed(broker, request, AclOperation.CREATE, TOPIC, name)


def require_config_access(broker, request, operation: AclOperation, resource) -> None:
    """DESCRIBE_CONFIGS or ALTER_CONFIGS on a config resource of DescribeConfigs/AlterConfigs:
    a topic (type 2) is checked on the topic, a group (32) on the group, a broker (4) or broker
    logger (8) on the cluster."""
    if broker.authorizer is None:
        return
    if resource.resource_type == CONFIG_RESOURCE_TOPIC:
        require_topic(broker, request, operation, resource.resource_name)
    elif resource.resource_type == CONFIG_RESOURCE_GROUP:
        require_group(broker, request, operation, resource.resource_name)
    else:
        require_cluster(broker, request, operation)


def allowed_on_any(broker, request, operation: AclOperation, resource_type: ResourceType) -> bool:
    """Whether `operation` is allowed on at least one resource of the type."""
    authorizer = broker.authorizer
    if authorizer is None:
        return True
    return authorizer.authorize_by_resource_type(principal(request), client_host(request), operation,
                                                 resource_type,
                                                 request_name=request_name(request.api_key))


def idempotence_allowed(broker, request) -> bool:
    """An idempotent producer's InitProducerId: IDEMPOTENT_WRITE on the cluster, or else WRITE
    on at least one topic."""
    return broker.authorizer is None \
        or cluster_allowed(broker, request, AclOperation.IDEMPOTENT_WRITE, log_denied=False) \
        or allowed_on_any(broker, request, AclOperation.WRITE, TOPIC)


def authorized_operations(broker, request, resource_type: ResourceType, name: str) -> int:
    """The bit field of the operations allowed on a resource (Metadata v8+, DescribeCluster,
    DescribeGroups when asked for): every supported one without an authorizer."""
    bits = 0
    for operation in SUPPORTED_OPERATIONS[resource_type]:
        if allowed(broker, request, operation, resource_type, name, log_denied=False):
            bits |= 1 << operation
    return bits
