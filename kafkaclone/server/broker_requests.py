"""Requests a broker sends on its own behalf: ControlledShutdown to the controller, over
a ``kafkaclone.network.client.KafkaClientConnection`` (the controller's and replica
fetcher's connection) with the inter-broker listener's security. Everything runs on the
reactor: nothing blocks it.
"""

from __future__ import annotations

import logging
from typing import Any

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.network.client import PLAINTEXT_CLIENT, ClientSecurity, KafkaClientConnection
from kafkaclone.protocol.api import APIS
from kafkaclone.protocol.api_keys import ApiKey

logger = logging.getLogger(__name__)

CONTROLLED_SHUTDOWN_VERSION = 3
CLIENT_ID = "kafkaclone-broker"


async def send_controlled_shutdown(
    reactor: Any, host: str, port: int, broker_id: int, broker_epoch: int, *, timeout_s: float,
    connect_timeout_s: float | None = None, security: ClientSecurity = PLAINTEXT_CLIENT,
) -> tuple[int, set[TopicPartition]]:
    """Send ControlledShutdown v3 to the controller at host:port: (error code, partitions
    the broker still leads). NetworkExceptionError / RequestTimedOutError on failure.
    ``connect_timeout_s``: socket.connection.setup.timeout.ms (``timeout_s`` if None)."""
    body = APIS[ApiKey.CONTROLLED_SHUTDOWN].request(broker_id=broker_id,
                                                    broker_epoch=broker_epoch)
    response = await send_request(reactor, host, port, ApiKey.CONTROLLED_SHUTDOWN,
                                  CONTROLLED_SHUTDOWN_VERSION, body, timeout_s=timeout_s,
                                  connect_timeout_s=connect_timeout_s, security=security)
    remaining = {TopicPartition(p.topic_name, p.partition_index)
                 for p in response.remaining_partitions}
    return int(response.error_code), remaining


async def send_request(
    reactor: Any, host: str, port: int, key: ApiKey, version: int, body: Any, *,
    timeout_s: float, connect_timeout_s: float | None = None,
    security: ClientSecurity = PLAINTEXT_CLIENT,
) -> Any:
    """One request on a fresh connection, closed afterwards; the decoded response body."""
    connection = KafkaClientConnection(reactor, host, port, client_id=CLIENT_ID,
                                       request_timeout=timeout_s,
                                       connect_timeout=connect_timeout_s, security=security)
    try:
        return await connection.send(key, version, body)
    finally:
        connection.close()
