"""Kafka's error codes as exception classes.

The table is Apache Kafka 2.8's ``Errors`` enum: codes -1 and 1 to 104, with Kafka's names
and default messages. ``retriable`` is True exactly where Kafka 2.8's exception for the code is
a ``RetriableException``. Code 0 (NONE) means success and has no class.

Handlers raise these and answer with ``exc.code``; clients turn a response's error code back
into an exception with :func:`raise_for_code`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

NONE = 0

_BY_CODE: dict[int, type[KafkaError]] = {}
_BY_NAME: dict[str, type[KafkaError]] = {}

ERRORS: Mapping[int, type[KafkaError]] = MappingProxyType(_BY_CODE)
"""Error code -> exception class, for every Kafka 2.8 code except NONE."""

ERROR_NAMES: Mapping[str, type[KafkaError]] = MappingProxyType(_BY_NAME)
"""Kafka's error name (``"CORRUPT_MESSAGE"``) -> exception class."""


class KafkaError(Exception):
    """An error that has a Kafka error code.

    Each subclass that sets ``code`` is one row of Kafka's table and registers itself in
    ``ERRORS`` and ``ERROR_NAMES``. A subclass that does not set ``code`` (DecodeError) is a
    more specific kind of its parent's error and answers with the parent's code.
    """

    code: ClassVar[int]
    name: ClassVar[str]
    retriable: ClassVar[bool]
    description: ClassVar[str]

    def __init__(self, message: str | None = None) -> None:
        self.message: str = self.description if message is None else message
        super().__init__(self.message)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "code" not in cls.__dict__:
            return
        missing = [a for a in ("name", "retriable", "description") if a not in cls.__dict__]
        if missing:
            raise TypeError(f"{cls.__name__} sets code {cls.code} but not {', '.join(missing)}")
        if cls.code == NONE:
            raise TypeError(f"{cls.__name__}: code 0 (NONE) is success, not an error")
        if cls.code in _BY_CODE:
            raise TypeError(f"{cls.__name__}: code {cls.code} is taken by {_BY_CODE[cls.code]}")
        if cls.name in _BY_NAME:
            raise TypeError(f"{cls.__name__}: name {cls.name} is taken by {_BY_NAME[cls.name]}")
        _BY_CODE[cls.code] = cls
        _BY_NAME[cls.name] = cls


class UnknownServerError(KafkaError):
    code = -1
    name = "UNKNOWN_SERVER_ERROR"
    retriable = False
    description = "The server experienced an unexpected error when processing the request."


class OffsetOutOfRangeError(KafkaError):
    code = 1
    name = "OFFSET_OUT_OF_RANGE"
    retriable = False
    description = (
        "The requested offset is not within the range of offsets maintained by the server."
    )


class CorruptMessageError(KafkaError):
    code = 2
    name = "CORRUPT_MESSAGE"
    retriable = True
    description = (
        "This message has failed its CRC checksum, exceeds the valid size, has a null key for a "
        "compacted topic, or is otherwise corrupt."
    )


class UnknownTopicOrPartitionError(KafkaError):
    code = 3
    name = "UNKNOWN_TOPIC_OR_PARTITION"
    retriable = True
    description = "This server does not host this topic-partition."


class InvalidFetchSizeError(KafkaError):
    code = 4
    name = "INVALID_FETCH_SIZE"
    retriable = False
    description = "The requested fetch size is invalid."


class LeaderNotAvailableError(KafkaError):
    code = 5
    name = "LEADER_NOT_AVAILABLE"
    retriable = True
    description = (
        "There is no leader for this topic-partition as we are in the middle of a leadership "
        "election."
    )


class NotLeaderOrFollowerError(KafkaError):
    code = 6
    name = "NOT_LEADER_OR_FOLLOWER"
    retriable = True
    description = (
        "For requests intended only for the leader, this error indicates that the broker is not "
        "the current leader. For requests intended for any replica, this error indicates that "
        "the broker is not a replica of the topic partition."
    )


class RequestTimedOutError(KafkaError):
    code = 7
    name = "REQUEST_TIMED_OUT"
    retriable = True
    description = "The request timed out."


class BrokerNotAvailableError(KafkaError):
    code = 8
    name = "BROKER_NOT_AVAILABLE"
    retriable = False
    description = "The broker is not available."


class ReplicaNotAvailableError(KafkaError):
    code = 9
    name = "REPLICA_NOT_AVAILABLE"
    retriable = True
    description = (
        "The replica is not available for the requested topic-partition. Produce/Fetch requests "
        "and other requests intended only for the leader or follower return "
        "NOT_LEADER_OR_FOLLOWER if the broker is not a replica of the topic-partition."
    )


class MessageTooLargeError(KafkaError):
    code = 10
    name = "MESSAGE_TOO_LARGE"
    retriable = False
    description = (
        "The request included a message larger than the max message size the server will accept."
    )


class StaleControllerEpochError(KafkaError):
    code = 11
    name = "STALE_CONTROLLER_EPOCH"
    retriable = False
    description = "The controller moved to another broker."


class OffsetMetadataTooLargeError(KafkaError):
    code = 12
    name = "OFFSET_METADATA_TOO_LARGE"
    retriable = False
    description = "The metadata field of the offset request was too large."


class NetworkExceptionError(KafkaError):
    code = 13
    name = "NETWORK_EXCEPTION"
    retriable = True
    description = "The server disconnected before a response was received."


class CoordinatorLoadInProgressError(KafkaError):
    code = 14
    name = "COORDINATOR_LOAD_IN_PROGRESS"
    retriable = True
    description = "The coordinator is loading and hence can't process requests."


class CoordinatorNotAvailableError(KafkaError):
    code = 15
    name = "COORDINATOR_NOT_AVAILABLE"
    retriable = True
    description = "The coordinator is not available."


class NotCoordinatorError(KafkaError):
    code = 16
    name = "NOT_COORDINATOR"
    retriable = True
    description = "This is not the correct coordinator."


class InvalidTopicExceptionError(KafkaError):
    code = 17
    name = "INVALID_TOPIC_EXCEPTION"
    retriable = False
    description = "The request attempted to perform an operation on an invalid topic."


class RecordListTooLargeError(KafkaError):
    code = 18
    name = "RECORD_LIST_TOO_LARGE"
    retriable = False
    description = (
        "The request included message batch larger than the configured segment size on the server."
    )


class NotEnoughReplicasError(KafkaError):
    code = 19
    name = "NOT_ENOUGH_REPLICAS"
    retriable = True
    description = "Messages are rejected since there are fewer in-sync replicas than required."


class NotEnoughReplicasAfterAppendError(KafkaError):
    code = 20
    name = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    retriable = True
    description = "Messages are written to the log, but to fewer in-sync replicas than required."


class InvalidRequiredAcksError(KafkaError):
    code = 21
    name = "INVALID_REQUIRED_ACKS"
    retriable = False
    description = "Produce request specified an invalid value for required acks."


class IllegalGenerationError(KafkaError):
    code = 22
    name = "ILLEGAL_GENERATION"
    retriable = False
    description = "Specified group generation id is not valid."


class InconsistentGroupProtocolError(KafkaError):
    code = 23
    name = "INCONSISTENT_GROUP_PROTOCOL"
    retriable = False
    description = (
        "The group member's supported protocols are incompatible with those of existing members "
        "or first group member tried to join with empty protocol type or empty protocol list."
    )


class InvalidGroupIdError(KafkaError):
    code = 24
    name = "INVALID_GROUP_ID"
    retriable = False
    description = "The configured groupId is invalid."


class UnknownMemberIdError(KafkaError):
    code = 25
    name = "UNKNOWN_MEMBER_ID"
    retriable = False
    description = "The coordinator is not aware of this member."


class InvalidSessionTimeoutError(KafkaError):
    code = 26
    name = "INVALID_SESSION_TIMEOUT"
    retriable = False
    description = (
        "The session timeout is not within the range allowed by the broker (as configured by "
        "group.min.session.timeout.ms and group.max.session.timeout.ms)."
    )


class RebalanceInProgressError(KafkaError):
    code = 27
    name = "REBALANCE_IN_PROGRESS"
    retriable = False
    description = "The group is rebalancing, so a rejoin is needed."


class InvalidCommitOffsetSizeError(KafkaError):
    code = 28
    name = "INVALID_COMMIT_OFFSET_SIZE"
    retriable = False
    description = "The committing offset data size is not valid."


class TopicAuthorizationFailedError(KafkaError):
    code = 29
    name = "TOPIC_AUTHORIZATION_FAILED"
    retriable = False
    description = "Topic authorization failed."


class GroupAuthorizationFailedError(KafkaError):
    code = 30
    name = "GROUP_AUTHORIZATION_FAILED"
    retriable = False
    description = "Group authorization failed."


class ClusterAuthorizationFailedError(KafkaError):
    code = 31
    name = "CLUSTER_AUTHORIZATION_FAILED"
    retriable = False
    description = "Cluster authorization failed."


class InvalidTimestampError(KafkaError):
    code = 32
    name = "INVALID_TIMESTAMP"
    retriable = False
    description = "The timestamp of the message is out of acceptable range."


class UnsupportedSaslMechanismError(KafkaError):
    code = 33
    name = "UNSUPPORTED_SASL_MECHANISM"
    retriable = False
    description = "The broker does not support the requested SASL mechanism."


class IllegalSaslStateError(KafkaError):
    code = 34
    name = "ILLEGAL_SASL_STATE"
    retriable = False
    description = "Request is not valid given the current SASL state."


class UnsupportedVersionError(KafkaError):
    code = 35
    name = "UNSUPPORTED_VERSION"
    retriable = False
    description = "The version of API is not supported."


class TopicAlreadyExistsError(KafkaError):
    code = 36
    name = "TOPIC_ALREADY_EXISTS"
    retriable = False
    description = "Topic with this name already exists."


class InvalidPartitionsError(KafkaError):
    code = 37
    name = "INVALID_PARTITIONS"
    retriable = False
    description = "Number of partitions is below 1."


class InvalidReplicationFactorError(KafkaError):
    code = 38
    name = "INVALID_REPLICATION_FACTOR"
    retriable = False
    description = "Replication factor is below 1 or larger than the number of available brokers."


class InvalidReplicaAssignmentError(KafkaError):
    code = 39
    name = "INVALID_REPLICA_ASSIGNMENT"
    retriable = False
    description = "Replica assignment is invalid."


class InvalidConfigError(KafkaError):
    code = 40
    name = "INVALID_CONFIG"
    retriable = False
    description = "Configuration is invalid."


class NotControllerError(KafkaError):
    code = 41
    name = "NOT_CONTROLLER"
    retriable = True
    description = "This is not the correct controller for this cluster."


class InvalidRequestError(KafkaError):
    code = 42
    name = "INVALID_REQUEST"
    retriable = False
    description = (
        "This most likely occurs because of a request being malformed by the client library or "
        "the message was sent to an incompatible broker. See the broker logs for more details."
    )


class UnsupportedForMessageFormatError(KafkaError):
    code = 43
    name = "UNSUPPORTED_FOR_MESSAGE_FORMAT"
    retriable = False
    description = "The message format version on the broker does not support the request."


class PolicyViolationError(KafkaError):
    code = 44
    name = "POLICY_VIOLATION"
    retriable = False
    description = "Request parameters do not satisfy the configured policy."


class OutOfOrderSequenceNumberError(KafkaError):
    code = 45
    name = "OUT_OF_ORDER_SEQUENCE_NUMBER"
    retriable = False
    description = "The broker received an out of order sequence number."


class DuplicateSequenceNumberError(KafkaError):
    code = 46
    name = "DUPLICATE_SEQUENCE_NUMBER"
    retriable = False
    description = "The broker received a duplicate sequence number."


class InvalidProducerEpochError(KafkaError):
    code = 47
    name = "INVALID_PRODUCER_EPOCH"
    retriable = False
    description = "Producer attempted to produce with an old epoch."


class InvalidTxnStateError(KafkaError):
    code = 48
    name = "INVALID_TXN_STATE"
    retriable = False
    description = "The producer attempted a transactional operation in an invalid state."


class InvalidProducerIdMappingError(KafkaError):
    code = 49
    name = "INVALID_PRODUCER_ID_MAPPING"
    retriable = False
    description = (
        "The producer attempted to use a producer id which is not currently assigned to its "
        "transactional id."
    )


class InvalidTransactionTimeoutError(KafkaError):
    code = 50
    name = "INVALID_TRANSACTION_TIMEOUT"
    retriable = False
    description = (
        "The transaction timeout is larger than the maximum value allowed by the broker (as "
        "configured by transaction.max.timeout.ms)."
    )


class ConcurrentTransactionsError(KafkaError):
    code = 51
    name = "CONCURRENT_TRANSACTIONS"
    retriable = False
    description = (
        "The producer attempted to update a transaction while another concurrent operation on "
        "the same transaction was ongoing."
    )


class TransactionCoordinatorFencedError(KafkaError):
    code = 52
    name = "TRANSACTION_COORDINATOR_FENCED"
    retriable = False
    description = (
        "Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the "
        "current coordinator for a given producer."
    )


class TransactionalIdAuthorizationFailedError(KafkaError):
    code = 53
    name = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    retriable = False
    description = "Transactional Id authorization failed."


class SecurityDisabledError(KafkaError):
    code = 54
    name = "SECURITY_DISABLED"
    retriable = False
    description = "Security features are disabled."


class OperationNotAttemptedError(KafkaError):
    code = 55
    name = "OPERATION_NOT_ATTEMPTED"
    retriable = False
    description = (
        "The broker did not attempt to execute this operation. This may happen for batched RPCs "
        "where some operations in the batch failed, causing the broker to respond without trying "
        "the rest."
    )


class KafkaStorageError(KafkaError):
    code = 56
    name = "KAFKA_STORAGE_ERROR"
    retriable = True
    description = "Disk error when trying to access log file on the disk."


class LogDirNotFoundError(KafkaError):
    code = 57
    name = "LOG_DIR_NOT_FOUND"
    retriable = False
    description = "The user-specified log directory is not found in the broker config."


class SaslAuthenticationFailedError(KafkaError):
    code = 58
    name = "SASL_AUTHENTICATION_FAILED"
    retriable = False
    description = "SASL Authentication failed."


class UnknownProducerIdError(KafkaError):
    code = 59
    name = "UNKNOWN_PRODUCER_ID"
    retriable = False
    description = (
        "This exception is raised by the broker if it could not locate the producer metadata "
        "associated with the producerId in question. This could happen if, for instance, the "
        "producer's records were deleted because their retention time had elapsed. Once the last "
        "records of the producerId are removed, the producer's metadata is removed from the "
        "broker, and future appends by the producer will return this exception."
    )


class ReassignmentInProgressError(KafkaError):
    code = 60
    name = "REASSIGNMENT_IN_PROGRESS"
    retriable = False
    description = "A partition reassignment is in progress."


class DelegationTokenAuthDisabledError(KafkaError):
    code = 61
    name = "DELEGATION_TOKEN_AUTH_DISABLED"
    retriable = False
    description = "Delegation Token feature is not enabled."


class DelegationTokenNotFoundError(KafkaError):
    code = 62
    name = "DELEGATION_TOKEN_NOT_FOUND"
    retriable = False
    description = "Delegation Token is not found on server."


class DelegationTokenOwnerMismatchError(KafkaError):
    code = 63
    name = "DELEGATION_TOKEN_OWNER_MISMATCH"
    retriable = False
    description = "Specified Principal is not valid Owner/Renewer."


class DelegationTokenRequestNotAllowedError(KafkaError):
    code = 64
    name = "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"
    retriable = False
    description = (
        "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on "
        "delegation token authenticated channels."
    )


class DelegationTokenAuthorizationFailedError(KafkaError):
    code = 65
    name = "DELEGATION_TOKEN_AUTHORIZATION_FAILED"
    retriable = False
    description = "Delegation Token authorization failed."


class DelegationTokenExpiredError(KafkaError):
    code = 66
    name = "DELEGATION_TOKEN_EXPIRED"
    retriable = False
    description = "Delegation Token is expired."


class InvalidPrincipalTypeError(KafkaError):
    code = 67
    name = "INVALID_PRINCIPAL_TYPE"
    retriable = False
    description = "Supplied principalType is not supported."


class NonEmptyGroupError(KafkaError):
    code = 68
    name = "NON_EMPTY_GROUP"
    retriable = False
    description = "The group is not empty."


class GroupIdNotFoundError(KafkaError):
    code = 69
    name = "GROUP_ID_NOT_FOUND"
    retriable = False
    description = "The group id does not exist."


class FetchSessionIdNotFoundError(KafkaError):
    code = 70
    name = "FETCH_SESSION_ID_NOT_FOUND"
    retriable = True
    description = "The fetch session ID was not found."


class InvalidFetchSessionEpochError(KafkaError):
    code = 71
    name = "INVALID_FETCH_SESSION_EPOCH"
    retriable = True
    description = "The fetch session epoch is invalid."


class ListenerNotFoundError(KafkaError):
    code = 72
    name = "LISTENER_NOT_FOUND"
    retriable = True
    description = (
        "There is no listener on the leader broker that matches the listener on which metadata "
        "request was processed."
    )


class TopicDeletionDisabledError(KafkaError):
    code = 73
    name = "TOPIC_DELETION_DISABLED"
    retriable = False
    description = "Topic deletion is disabled."


class FencedLeaderEpochError(KafkaError):
    code = 74
    name = "FENCED_LEADER_EPOCH"
    retriable = True
    description = "The leader epoch in the request is older than the epoch on the broker."


class UnknownLeaderEpochError(KafkaError):
    code = 75
    name = "UNKNOWN_LEADER_EPOCH"
    retriable = True
    description = "The leader epoch in the request is newer than the epoch on the broker."


class UnsupportedCompressionTypeError(KafkaError):
    code = 76
    name = "UNSUPPORTED_COMPRESSION_TYPE"
    retriable = False
    description = "The requesting client does not support the compression type of given partition."


class StaleBrokerEpochError(KafkaError):
    code = 77
    name = "STALE_BROKER_EPOCH"
    retriable = False
    description = "Broker epoch has changed."


class OffsetNotAvailableError(KafkaError):
    code = 78
    name = "OFFSET_NOT_AVAILABLE"
    retriable = True
    description = (
        "The leader high watermark has not caught up from a recent leader election so the "
        "offsets cannot be guaranteed to be monotonically increasing."
    )


class MemberIdRequiredError(KafkaError):
    code = 79
    name = "MEMBER_ID_REQUIRED"
    retriable = False
    description = (
        "The group member needs to have a valid member id before actually entering a consumer "
        "group."
    )


class PreferredLeaderNotAvailableError(KafkaError):
    code = 80
    name = "PREFERRED_LEADER_NOT_AVAILABLE"
    retriable = True
    description = "The preferred leader was not available."


class GroupMaxSizeReachedError(KafkaError):
    code = 81
    name = "GROUP_MAX_SIZE_REACHED"
    retriable = False
    description = "The consumer group has reached its max size."


class FencedInstanceIdError(KafkaError):
    code = 82
    name = "FENCED_INSTANCE_ID"
    retriable = False
    description = (
        "The broker rejected this static consumer since another consumer with the same "
        "group.instance.id has registered with a different member.id."
    )


class EligibleLeadersNotAvailableError(KafkaError):
    code = 83
    name = "ELIGIBLE_LEADERS_NOT_AVAILABLE"
    retriable = True
    description = "Eligible topic partition leaders are not available."


class ElectionNotNeededError(KafkaError):
    code = 84
    name = "ELECTION_NOT_NEEDED"
    retriable = True
    description = "Leader election not needed for topic partition."


class NoReassignmentInProgressError(KafkaError):
    code = 85
    name = "NO_REASSIGNMENT_IN_PROGRESS"
    retriable = False
    description = "No partition reassignment is in progress."


class GroupSubscribedToTopicError(KafkaError):
    code = 86
    name = "GROUP_SUBSCRIBED_TO_TOPIC"
    retriable = False
    description = (
        "Deleting offsets of a topic is forbidden while the consumer group is actively "
        "subscribed to it."
    )


class InvalidRecordError(KafkaError):
    code = 87
    name = "INVALID_RECORD"
    retriable = False
    description = "This record has failed the validation on broker and hence will be rejected."


class UnstableOffsetCommitError(KafkaError):
    code = 88
    name = "UNSTABLE_OFFSET_COMMIT"
    retriable = True
    description = "There are unstable offsets that need to be cleared."


class ThrottlingQuotaExceededError(KafkaError):
    code = 89
    name = "THROTTLING_QUOTA_EXCEEDED"
    retriable = True
    description = "The throttling quota has been exceeded."


class ProducerFencedError(KafkaError):
    code = 90
    name = "PRODUCER_FENCED"
    retriable = False
    description = (
        "There is a newer producer with the same transactionalId which fences the current one."
    )


class ResourceNotFoundError(KafkaError):
    code = 91
    name = "RESOURCE_NOT_FOUND"
    retriable = False
    description = "A request illegally referred to a resource that does not exist."


class DuplicateResourceError(KafkaError):
    code = 92
    name = "DUPLICATE_RESOURCE"
    retriable = False
    description = "A request illegally referred to the same resource twice."


class UnacceptableCredentialError(KafkaError):
    code = 93
    name = "UNACCEPTABLE_CREDENTIAL"
    retriable = False
    description = "Requested credential would not meet criteria for acceptability."


class InconsistentVoterSetError(KafkaError):
    code = 94
    name = "INCONSISTENT_VOTER_SET"
    retriable = False
    description = (
        "Indicates that the either the sender or recipient of a voter-only request is not one of "
        "the expected voters"
    )


class InvalidUpdateVersionError(KafkaError):
    code = 95
    name = "INVALID_UPDATE_VERSION"
    retriable = False
    description = "The given update version was invalid."


class FeatureUpdateFailedError(KafkaError):
    code = 96
    name = "FEATURE_UPDATE_FAILED"
    retriable = False
    description = "Unable to update finalized features due to an unexpected server error."


class PrincipalDeserializationFailureError(KafkaError):
    code = 97
    name = "PRINCIPAL_DESERIALIZATION_FAILURE"
    retriable = False
    description = (
        "Request principal deserialization failed during forwarding. This indicates an internal "
        "error on the broker cluster security setup."
    )


class SnapshotNotFoundError(KafkaError):
    code = 98
    name = "SNAPSHOT_NOT_FOUND"
    retriable = False
    description = "Requested snapshot was not found"


class PositionOutOfRangeError(KafkaError):
    code = 99
    name = "POSITION_OUT_OF_RANGE"
    retriable = False
    description = (
        "Requested position is not greater than or equal to zero, and less than the size of the "
        "snapshot."
    )


class UnknownTopicIdError(KafkaError):
    code = 100
    name = "UNKNOWN_TOPIC_ID"
    retriable = True
    description = "This server does not host this topic ID."


class DuplicateBrokerRegistrationError(KafkaError):
    code = 101
    name = "DUPLICATE_BROKER_REGISTRATION"
    retriable = False
    description = "This broker ID is already in use."


class BrokerIdNotRegisteredError(KafkaError):
    code = 102
    name = "BROKER_ID_NOT_REGISTERED"
    retriable = False
    description = "The given broker ID was not registered."


class InconsistentTopicIdError(KafkaError):
    code = 103
    name = "INCONSISTENT_TOPIC_ID"
    retriable = True
    description = "The log's topic ID did not match the topic ID in the request"


class InconsistentClusterIdError(KafkaError):
    code = 104
    name = "INCONSISTENT_CLUSTER_ID"
    retriable = False
    description = "The clusterId in the request does not match that found on the server"


# Protocol-layer refinements: not Kafka codes of their own, they answer with their parent's.


class DecodeError(InvalidRequestError):
    """A buffer that does not parse: truncated, a negative or oversized length, a varint that
    never ends, bad UTF-8. Raised by every decoder; the client gets INVALID_REQUEST (42)."""


def error_for_code(code: int) -> type[KafkaError]:
    """The exception class for an error code; UnknownServerError for a code this table lacks,
    as Kafka's clients do. Code 0 (NONE) is success and has no class: ValueError."""
    if code == NONE:
        raise ValueError("error code 0 (NONE) means success and has no exception class")
    return _BY_CODE.get(code, UnknownServerError)


def raise_for_code(code: int, message: str | None = None) -> None:
    """Raise the exception for an error code from a response; do nothing for NONE.

    A code this table lacks raises UnknownServerError with the numeric code in its message.
    """
    if code == NONE:
        return
    error = _BY_CODE.get(code)
    if error is None:
        detail = f"unexpected error code {code}"
        raise UnknownServerError(detail if message is None else f"{detail}: {message}")
    raise error(message)
