"""The KafkaError tree: every error a client can see, each class carrying its Kafka error code.

Code raises these where the failure happens; `server/dispatch.py` turns them into error codes in
one place. Names follow Kafka's `Errors` enum (the class name is the CamelCase of the error name)
so that a user reading a log line recognises the error a client would report.
"""

from __future__ import annotations


class KafkaError(Exception):
    """Base of every error that maps to a Kafka error code.

    `code` is the protocol's int16 error code; `retriable` says whether a client may retry.
    The message is for people: what happened, and where useful what to do.
    """

    code: int = -1
    name: str = "UNKNOWN_SERVER_ERROR"
    retriable: bool = False
    # KIP-467: `(batch index, message)` of each record that failed validation, when the error
    # can name them (Kafka's RecordValidationException); a Produce v8+ answer lists them.
    record_errors: tuple[tuple[int, str], ...] = ()


def _error(name: str, code: int, *, retriable: bool = False) -> type[KafkaError]:
    cls_name = "".join(part.capitalize() for part in name.split("_")) + "Error"
    return type(cls_name, (KafkaError,), {"code": code, "name": name, "retriable": retriable,
                                          "__doc__": f"Kafka error {name} ({code})."})


UnknownServerError = _error("UNKNOWN_SERVER_ERROR", -1)
OffsetOutOfRangeError = _error("OFFSET_OUT_OF_RANGE", 1)
CorruptMessageError = _error("CORRUPT_MESSAGE", 2, retriable=True)
UnknownTopicOrPartitionError = _error("UNKNOWN_TOPIC_OR_PARTITION", 3, retriable=True)
InvalidFetchSizeError = _error("INVALID_FETCH_SIZE", 4)
LeaderNotAvailableError = _error("LEADER_NOT_AVAILABLE", 5, retriable=True)
NotLeaderOrFollowerError = _error("NOT_LEADER_OR_FOLLOWER", 6, retriable=True)
RequestTimedOutError = _error("REQUEST_TIMED_OUT", 7, retriable=True)
BrokerNotAvailableError = _error("BROKER_NOT_AVAILABLE", 8)
ReplicaNotAvailableError = _error("REPLICA_NOT_AVAILABLE", 9, retriable=True)
MessageTooLargeError = _error("MESSAGE_TOO_LARGE", 10)
StaleControllerEpochError = _error("STALE_CONTROLLER_EPOCH", 11)
OffsetMetadataTooLargeError = _error("OFFSET_METADATA_TOO_LARGE", 12)
NetworkExceptionError = _error("NETWORK_EXCEPTION", 13, retriable=True)
CoordinatorLoadInProgressError = _error("COORDINATOR_LOAD_IN_PROGRESS", 14, retriable=True)
CoordinatorNotAvailableError = _error("COORDINATOR_NOT_AVAILABLE", 15, retriable=True)
NotCoordinatorError = _error("NOT_COORDINATOR", 16, retriable=True)
InvalidTopicExceptionError = _error("INVALID_TOPIC_EXCEPTION", 17)
RecordListTooLargeError = _error("RECORD_LIST_TOO_LARGE", 18)
NotEnoughReplicasError = _error("NOT_ENOUGH_REPLICAS", 19, retriable=True)
NotEnoughReplicasAfterAppendError = _error("NOT_ENOUGH_REPLICAS_AFTER_APPEND", 20, retriable=True)
InvalidRequiredAcksError = _error("INVALID_REQUIRED_ACKS", 21)
IllegalGenerationError = _error("ILLEGAL_GENERATION", 22)
InconsistentGroupProtocolError = _error("INCONSISTENT_GROUP_PROTOCOL", 23)
InvalidGroupIdError = _error("INVALID_GROUP_ID", 24)
UnknownMemberIdError = _error("UNKNOWN_MEMBER_ID", 25)
InvalidSessionTimeoutError = _error("INVALID_SESSION_TIMEOUT", 26)
RebalanceInProgressError = _error("REBALANCE_IN_PROGRESS", 27)
InvalidCommitOffsetSizeError = _error("INVALID_COMMIT_OFFSET_SIZE", 28)
TopicAuthorizationFailedError = _error("TOPIC_AUTHORIZATION_FAILED", 29)
GroupAuthorizationFailedError = _error("GROUP_AUTHORIZATION_FAILED", 30)
ClusterAuthorizationFailedError = _error("CLUSTER_AUTHORIZATION_FAILED", 31)
InvalidTimestampError = _error("INVALID_TIMESTAMP", 32)
UnsupportedSaslMechanismError = _error("UNSUPPORTED_SASL_MECHANISM", 33)
IllegalSaslStateError = _error("ILLEGAL_SASL_STATE", 34)
UnsupportedVersionError = _error("UNSUPPORTED_VERSION", 35)
TopicAlreadyExistsError = _error("TOPIC_ALREADY_EXISTS", 36)
InvalidPartitionsError = _error("INVALID_PARTITIONS", 37)
InvalidReplicationFactorError = _error("INVALID_REPLICATION_FACTOR", 38)
InvalidReplicaAssignmentError = _error("INVALID_REPLICA_ASSIGNMENT", 39)
InvalidConfigError = _error("INVALID_CONFIG", 40)
NotControllerError = _error("NOT_CONTROLLER", 41, retriable=True)
InvalidRequestError = _error("INVALID_REQUEST", 42)
UnsupportedForMessageFormatError = _error("UNSUPPORTED_FOR_MESSAGE_FORMAT", 43)
PolicyViolationError = _error("POLICY_VIOLATION", 44)
OutOfOrderSequenceNumberError = _error("OUT_OF_ORDER_SEQUENCE_NUMBER", 45)
DuplicateSequenceNumberError = _error("DUPLICATE_SEQUENCE_NUMBER", 46)
InvalidProducerEpochError = _error("INVALID_PRODUCER_EPOCH", 47)
InvalidTxnStateError = _error("INVALID_TXN_STATE", 48)
InvalidProducerIdMappingError = _error("INVALID_PRODUCER_ID_MAPPING", 49)
InvalidTransactionTimeoutError = _error("INVALID_TRANSACTION_TIMEOUT", 50)
ConcurrentTransactionsError = _error("CONCURRENT_TRANSACTIONS", 51, retriable=True)
TransactionCoordinatorFencedError = _error("TRANSACTION_COORDINATOR_FENCED", 52)
TransactionalIdAuthorizationFailedError = _error("TRANSACTIONAL_ID_AUTHORIZATION_FAILED", 53)
SecurityDisabledError = _error("SECURITY_DISABLED", 54)
OperationNotAttemptedError = _error("OPERATION_NOT_ATTEMPTED", 55)
KafkaStorageErrorError = _error("KAFKA_STORAGE_ERROR", 56, retriable=True)
LogDirNotFoundError = _error("LOG_DIR_NOT_FOUND", 57)
SaslAuthenticationFailedError = _error("SASL_AUTHENTICATION_FAILED", 58)
UnknownProducerIdError = _error("UNKNOWN_PRODUCER_ID", 59)
ReassignmentInProgressError = _error("REASSIGNMENT_IN_PROGRESS", 60)
DelegationTokenAuthDisabledError = _error("DELEGATION_TOKEN_AUTH_DISABLED", 61)
DelegationTokenNotFoundError = _error("DELEGATION_TOKEN_NOT_FOUND", 62)
DelegationTokenOwnerMismatchError = _error("DELEGATION_TOKEN_OWNER_MISMATCH", 63)
DelegationTokenRequestNotAllowedError = _error("DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", 64)
DelegationTokenAuthorizationFailedError = _error("DELEGATION_TOKEN_AUTHORIZATION_FAILED", 65)
DelegationTokenExpiredError = _error("DELEGATION_TOKEN_EXPIRED", 66)
InvalidPrincipalTypeError = _error("INVALID_PRINCIPAL_TYPE", 67)
NonEmptyGroupError = _error("NON_EMPTY_GROUP", 68)
GroupIdNotFoundError = _error("GROUP_ID_NOT_FOUND", 69)
TopicDeletionDisabledError = _error("TOPIC_DELETION_DISABLED", 73)
FencedLeaderEpochError = _error("FENCED_LEADER_EPOCH", 74, retriable=True)
UnknownLeaderEpochError = _error("UNKNOWN_LEADER_EPOCH", 75, retriable=True)
UnsupportedCompressionTypeError = _error("UNSUPPORTED_COMPRESSION_TYPE", 76)
StaleBrokerEpochError = _error("STALE_BROKER_EPOCH", 77)
OffsetNotAvailableError = _error("OFFSET_NOT_AVAILABLE", 78, retriable=True)
MemberIdRequiredError = _error("MEMBER_ID_REQUIRED", 79)
PreferredLeaderNotAvailableError = _error("PREFERRED_LEADER_NOT_AVAILABLE", 80, retriable=True)
GroupMaxSizeReachedError = _error("GROUP_MAX_SIZE_REACHED", 81)
FencedInstanceIdError = _error("FENCED_INSTANCE_ID", 82)
EligibleLeadersNotAvailableError = _error("ELIGIBLE_LEADERS_NOT_AVAILABLE", 83, retriable=True)
ElectionNotNeededError = _error("ELECTION_NOT_NEEDED", 84)
NoReassignmentInProgressError = _error("NO_REASSIGNMENT_IN_PROGRESS", 85)
GroupSubscribedToTopicError = _error("GROUP_SUBSCRIBED_TO_TOPIC", 86)
InvalidRecordError = _error("INVALID_RECORD", 87)
UnstableOffsetCommitError = _error("UNSTABLE_OFFSET_COMMIT", 88, retriable=True)
ThrottlingQuotaExceededError = _error("THROTTLING_QUOTA_EXCEEDED", 89, retriable=True)
ProducerFencedError = _error("PRODUCER_FENCED", 90)
ResourceNotFoundError = _error("RESOURCE_NOT_FOUND", 91)
DuplicateResourceError = _error("DUPLICATE_RESOURCE", 92)
UnacceptableCredentialError = _error("UNACCEPTABLE_CREDENTIAL", 93)
InconsistentVoterSetError = _error("INCONSISTENT_VOTER_SET", 94)
InvalidUpdateVersionError = _error("INVALID_UPDATE_VERSION", 95)
FeatureUpdateFailedError = _error("FEATURE_UPDATE_FAILED", 96)
PrincipalDeserializationFailureError = _error("PRINCIPAL_DESERIALIZATION_FAILURE", 97)
SnapshotNotFoundError = _error("SNAPSHOT_NOT_FOUND", 98)
PositionOutOfRangeError = _error("POSITION_OUT_OF_RANGE", 99)
UnknownTopicIdError = _error("UNKNOWN_TOPIC_ID", 100, retriable=True)
DuplicateBrokerRegistrationError = _error("DUPLICATE_BROKER_REGISTRATION", 101)
BrokerIdNotRegisteredError = _error("BROKER_ID_NOT_REGISTERED", 102)
InconsistentTopicIdError = _error("INCONSISTENT_TOPIC_ID", 103, retriable=True)
InconsistentClusterIdError = _error("INCONSISTENT_CLUSTER_ID", 104)
TransactionalIdNotFoundError = _error("TRANSACTIONAL_ID_NOT_FOUND", 105)
FetchSessionTopicIdError = _error("FETCH_SESSION_TOPIC_ID_ERROR", 106, retriable=True)
IneligibleReplicaError = _error("INELIGIBLE_REPLICA", 107)
NewLeaderElectedError = _error("NEW_LEADER_ELECTED", 108)
OffsetMovedToTieredStorageError = _error("OFFSET_MOVED_TO_TIERED_STORAGE", 109)
FencedMemberEpochError = _error("FENCED_MEMBER_EPOCH", 110)
UnreleasedInstanceIdError = _error("UNRELEASED_INSTANCE_ID", 111)
UnsupportedAssignorError = _error("UNSUPPORTED_ASSIGNOR", 112)
StaleMemberEpochError = _error("STALE_MEMBER_EPOCH", 113)
MismatchedEndpointTypeError = _error("MISMATCHED_ENDPOINT_TYPE", 114)
UnsupportedEndpointTypeError = _error("UNSUPPORTED_ENDPOINT_TYPE", 115)
UnknownControllerIdError = _error("UNKNOWN_CONTROLLER_ID", 116)
UnknownSubscriptionIdError = _error("UNKNOWN_SUBSCRIPTION_ID", 117)
TelemetryTooLargeError = _error("TELEMETRY_TOO_LARGE", 118)
InvalidRegistrationError = _error("INVALID_REGISTRATION", 119)
TransactionAbortableError = _error("TRANSACTION_ABORTABLE", 120)
InvalidRecordStateError = _error("INVALID_RECORD_STATE", 121)
ShareSessionNotFoundError = _error("SHARE_SESSION_NOT_FOUND", 122, retriable=True)
InvalidShareSessionEpochError = _error("INVALID_SHARE_SESSION_EPOCH", 123, retriable=True)
FencedStateEpochError = _error("FENCED_STATE_EPOCH", 124)
InvalidVoterKeyError = _error("INVALID_VOTER_KEY", 125)
DuplicateVoterError = _error("DUPLICATE_VOTER", 126)
VoterNotFoundError = _error("VOTER_NOT_FOUND", 127)
InvalidRegularExpressionError = _error("INVALID_REGULAR_EXPRESSION", 128)
RebootstrapRequiredError = _error("REBOOTSTRAP_REQUIRED", 129)
StreamsInvalidTopologyError = _error("STREAMS_INVALID_TOPOLOGY", 130)
StreamsInvalidTopologyEpochError = _error("STREAMS_INVALID_TOPOLOGY_EPOCH", 131)
StreamsTopologyFencedError = _error("STREAMS_TOPOLOGY_FENCED", 132)
ShareSessionLimitReachedError = _error("SHARE_SESSION_LIMIT_REACHED", 133, retriable=True)

# Aliases under the names the design uses; the classes above stay the single source of codes.
CorruptRecordError = CorruptMessageError
RecordTooLargeError = MessageTooLargeError
InvalidTopicError = InvalidTopicExceptionError
KafkaStorageError = KafkaStorageErrorError

BY_CODE: dict[int, type[KafkaError]] = {
    cls.code: cls for cls in list(globals().values())
    if isinstance(cls, type) and issubclass(cls, KafkaError) and cls is not KafkaError
}


def error_name(code: int) -> str:
    """The Kafka name of an error code (`NONE` for 0), for logs and CLI output."""
    if code == 0:
        return "NONE"
    cls = BY_CODE.get(code)
    return cls.name if cls else f"UNKNOWN_ERROR_CODE_{code}"


def error_for_code(code: int, message: str = "") -> KafkaError | None:
    """The KafkaError of a code a peer answered (None for 0), for code that acts on it."""
    if code == 0:
        return None
    cls = BY_CODE.get(code, UnknownServerError)
    return cls(message or f"answered {cls.name}")
