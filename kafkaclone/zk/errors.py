"""Errors of the ZooKeeper layer.

Where Kafka has an error code for the situation, the error is a more specific kind of that
code's class (it answers with the parent's code); the rest are plain exceptions.
"""

from __future__ import annotations

from kafkaclone.common.errors import (
    DuplicateBrokerRegistrationError,
    NotControllerError,
    UnknownServerError,
)


class ControllerMovedError(NotControllerError):
    """Kafka's ControllerMovedException: this broker is no longer the controller.

    Raised when a controller write's check on ``/controller_epoch``'s zkVersion fails (a
    newer controller bumped the epoch), or when the controller election is lost.
    """


class BrokerIdAlreadyRegisteredError(DuplicateBrokerRegistrationError):
    """``/brokers/ids/<id>`` exists and belongs to another ZooKeeper session."""

    def __init__(self, broker_id: int) -> None:
        super().__init__(f"broker.id {broker_id} already registered")
        self.broker_id = broker_id


class ZNodeDecodeError(ValueError):
    """A znode's payload is not what Kafka writes there."""

    def __init__(self, what: str, data: bytes, reason: str) -> None:
        shown = data[:200].decode("utf-8", errors="replace")
        super().__init__(f"cannot decode {what}: {reason}: {shown!r}")
        self.data = data


class ZooKeeperClientError(Exception):
    """The ZooKeeper session cannot serve the request."""


class ZooKeeperClientTimeoutError(ZooKeeperClientError):
    """Kafka's ZooKeeperClientTimeoutException: not connected within the timeout."""


class ZooKeeperClientClosedError(ZooKeeperClientError):
    """The client was closed."""


class ZooKeeperRequestTooLargeError(ZooKeeperClientError):
    """A write larger than ZooKeeper's jute.maxbuffer, refused before it is sent (the server
    would close the connection on it, and the retried request would never get through)."""

    def __init__(self, path: str, size: int, limit: int) -> None:
        super().__init__(f"write of {size} bytes to {path} exceeds ZooKeeper's limit of "
                         f"{limit} bytes (jute.maxbuffer)")
        self.path = path
        self.size = size
        self.limit = limit


class TopicAlreadyMarkedForDeletionError(Exception):
    """``/admin/delete_topics/<t>`` exists already (Kafka's
    TopicAlreadyMarkedForDeletionException; DeleteTopics treats it as success)."""


class AdminOperationError(UnknownServerError):
    """Kafka's AdminOperationException: an admin request that cannot be carried out as asked
    (replica placement over brokers of which only some have a rack). Not an ApiException in
    Kafka, so a request answers UNKNOWN_SERVER_ERROR, with this message."""
