"""The Kafka 2.8 error table in kafkaclone.common.errors."""

from __future__ import annotations

import pickle

import pytest

from kafkaclone.common import errors
from kafkaclone.common.errors import (
    ERROR_NAMES,
    ERRORS,
    NONE,
    DecodeError,
    InvalidRequestError,
    KafkaError,
    NotLeaderOrFollowerError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
    error_for_code,
    raise_for_code,
)

# Checked against Kafka 2.8: Errors.java for code and name; the 2.8 javadoc class hierarchy
# (is the exception a RetriableException?) for the flag.
SPOT_CHECKS = [
    (-1, "UNKNOWN_SERVER_ERROR", False, "UnknownServerError"),
    (1, "OFFSET_OUT_OF_RANGE", False, "OffsetOutOfRangeError"),
    (2, "CORRUPT_MESSAGE", True, "CorruptMessageError"),
    (3, "UNKNOWN_TOPIC_OR_PARTITION", True, "UnknownTopicOrPartitionError"),
    (6, "NOT_LEADER_OR_FOLLOWER", True, "NotLeaderOrFollowerError"),
    (7, "REQUEST_TIMED_OUT", True, "RequestTimedOutError"),
    (9, "REPLICA_NOT_AVAILABLE", True, "ReplicaNotAvailableError"),
    (10, "MESSAGE_TOO_LARGE", False, "MessageTooLargeError"),
    (11, "STALE_CONTROLLER_EPOCH", False, "StaleControllerEpochError"),
    (13, "NETWORK_EXCEPTION", True, "NetworkExceptionError"),
    (15, "COORDINATOR_NOT_AVAILABLE", True, "CoordinatorNotAvailableError"),
    (20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", True, "NotEnoughReplicasAfterAppendError"),
    (27, "REBALANCE_IN_PROGRESS", False, "RebalanceInProgressError"),
    (35, "UNSUPPORTED_VERSION", False, "UnsupportedVersionError"),
    (41, "NOT_CONTROLLER", True, "NotControllerError"),
    (42, "INVALID_REQUEST", False, "InvalidRequestError"),
    (51, "CONCURRENT_TRANSACTIONS", False, "ConcurrentTransactionsError"),
    (56, "KAFKA_STORAGE_ERROR", True, "KafkaStorageError"),
    (70, "FETCH_SESSION_ID_NOT_FOUND", True, "FetchSessionIdNotFoundError"),
    (76, "UNSUPPORTED_COMPRESSION_TYPE", False, "UnsupportedCompressionTypeError"),
    (87, "INVALID_RECORD", False, "InvalidRecordError"),
    (89, "THROTTLING_QUOTA_EXCEEDED", True, "ThrottlingQuotaExceededError"),
    (90, "PRODUCER_FENCED", False, "ProducerFencedError"),
    (100, "UNKNOWN_TOPIC_ID", True, "UnknownTopicIdError"),
    (103, "INCONSISTENT_TOPIC_ID", True, "InconsistentTopicIdError"),
    (104, "INCONSISTENT_CLUSTER_ID", False, "InconsistentClusterIdError"),
]

# Every code whose Kafka 2.8 exception is a RetriableException.
RETRIABLE_CODES = {
    2, 3, 5, 6, 7, 9, 13, 14, 15, 16, 19, 20, 41, 56,
    70, 71, 72, 74, 75, 78, 80, 83, 84, 88, 89, 100, 103,
}  # fmt: skip


def expected_class_name(kafka_name: str) -> str:
    words = kafka_name.split("_")
    if words[-1] == "ERROR":
        words = words[:-1]
    return "".join(word.capitalize() for word in words) + "Error"


def test_table_covers_kafka_2_8_codes_without_gaps() -> None:
    assert sorted(ERRORS) == [-1, *range(1, 105)]
    assert NONE == 0
    assert NONE not in ERRORS


def test_codes_and_names_are_unique() -> None:
    classes = list(ERRORS.values())
    assert len({cls.code for cls in classes}) == len(classes)
    assert len({cls.name for cls in classes}) == len(classes)
    assert len(ERROR_NAMES) == len(ERRORS)
    for code, cls in ERRORS.items():
        assert cls.code == code
        assert ERROR_NAMES[cls.name] is cls


@pytest.mark.parametrize(("code", "name", "retriable", "class_name"), SPOT_CHECKS)
def test_spot_checks_against_kafka(code: int, name: str, retriable: bool, class_name: str) -> None:
    cls = ERRORS[code]
    assert cls.__name__ == class_name
    assert getattr(errors, class_name) is cls
    assert cls.name == name
    assert cls.retriable is retriable
    assert ERROR_NAMES[name] is cls


def test_retriable_flags_match_kafka_2_8() -> None:
    assert {code for code, cls in ERRORS.items() if cls.retriable} == RETRIABLE_CODES


def test_every_class_is_a_described_kafka_error_named_after_kafka() -> None:
    for cls in ERRORS.values():
        assert issubclass(cls, KafkaError)
        assert isinstance(cls.retriable, bool)
        assert cls.description.strip() == cls.description
        assert len(cls.description) > 10
        assert cls.__name__ == expected_class_name(cls.name)
        assert getattr(errors, cls.__name__) is cls


def test_message_defaults_to_description() -> None:
    exc = UnknownTopicOrPartitionError()
    assert exc.message == "This server does not host this topic-partition."
    assert str(exc) == exc.message
    custom = UnknownTopicOrPartitionError("topic 'x' partition 7 does not exist")
    assert custom.message == "topic 'x' partition 7 does not exist"
    assert custom.code == 3


def test_errors_survive_pickling() -> None:
    exc = pickle.loads(pickle.dumps(NotLeaderOrFollowerError("broker 2 leads now")))
    assert type(exc) is NotLeaderOrFollowerError
    assert exc.message == "broker 2 leads now"


def test_error_for_code() -> None:
    assert error_for_code(6) is NotLeaderOrFollowerError
    assert error_for_code(-1) is UnknownServerError
    assert error_for_code(105) is UnknownServerError
    assert error_for_code(-2) is UnknownServerError
    with pytest.raises(ValueError, match="NONE"):
        error_for_code(NONE)


def test_raise_for_code_known_code() -> None:
    with pytest.raises(NotLeaderOrFollowerError) as info:
        raise_for_code(6)
    assert info.value.message == NotLeaderOrFollowerError.description
    with pytest.raises(UnknownTopicOrPartitionError, match="no such topic"):
        raise_for_code(3, "no such topic")


def test_raise_for_code_none_is_success() -> None:
    raise_for_code(NONE)
    raise_for_code(NONE, "ignored")


def test_raise_for_code_unknown_code_names_the_code() -> None:
    with pytest.raises(UnknownServerError) as info:
        raise_for_code(9999)
    assert type(info.value) is UnknownServerError
    assert info.value.code == -1
    assert "9999" in info.value.message
    with pytest.raises(UnknownServerError, match=r"9999.*disk on fire"):
        raise_for_code(9999, "disk on fire")


def test_decode_error_is_invalid_request() -> None:
    exc = DecodeError("buffer ends inside a varint")
    assert isinstance(exc, InvalidRequestError)
    assert isinstance(exc, KafkaError)
    assert exc.code == 42
    assert exc.name == "INVALID_REQUEST"
    assert exc.retriable is False
    assert exc.message == "buffer ends inside a varint"
    assert ERRORS[42] is InvalidRequestError
    assert DecodeError not in ERRORS.values()


def test_registry_rejects_a_duplicate_code() -> None:
    with pytest.raises(TypeError, match="code 3"):

        class _Clash(KafkaError):
            code = 3
            name = "SOMETHING_ELSE"
            retriable = False
            description = "clashes with UNKNOWN_TOPIC_OR_PARTITION"

    assert ERRORS[3] is UnknownTopicOrPartitionError
    assert "SOMETHING_ELSE" not in ERROR_NAMES


def test_registry_rejects_an_incomplete_row() -> None:
    with pytest.raises(TypeError, match="description"):

        class _Incomplete(KafkaError):
            code = 5000
            name = "INCOMPLETE"
            retriable = False

    assert 5000 not in ERRORS
