"""A Connect worker's membership in its ``group.id`` (Kafka's ``WorkerGroupMember`` and
``WorkerCoordinator``): JoinGroup with protocol type ``connect``, the leader computes the
assignment, SyncGroup hands it out, a thread heartbeats.

This is Kafka's eager protocol (``connect.protocol=eager``): on every rebalance each
worker stops everything it runs before rejoining. Kafka 2.8's default, incremental
cooperative rebalancing (``compatible`` / ``sessioned``, with
``scheduled.rebalance.max.delay.ms``), is not built. The member metadata and the
assignment are JSON, not Kafka's ConnectProtocol structs, so kafkaclone and Kafka workers
cannot share a group.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Final

from kafkaclone.clients.config import ConsumerConfig
from kafkaclone.clients.connection import BrokerConnection
from kafkaclone.clients.network import Metadata
from kafkaclone.common.errors import (
    NONE,
    CoordinatorNotAvailableError,
    IllegalGenerationError,
    KafkaError,
    MemberIdRequiredError,
    NotCoordinatorError,
    RebalanceInProgressError,
    UnknownMemberIdError,
    error_for_code,
)
from kafkaclone.protocol import api
from kafkaclone.protocol.api_keys import ApiKey

logger = logging.getLogger(__name__)

PROTOCOL_TYPE: Final = "connect"
PROTOCOL: Final = "eager"

Assignor = Callable[[str, dict[str, dict[str, Any]]], dict[str, dict[str, Any]]]
"""The leader's part: (the leader's member id, every member's metadata by member id) ->
each member's assignment."""


class WorkerGroupMember:
    def __init__(self, bootstrap: str, group_id: str, *, client_id: str,
                 session_timeout_ms: int, heartbeat_interval_ms: int,
                 rebalance_timeout_ms: int) -> None:
        self.group_id = group_id
        self.client_id = client_id
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_s = heartbeat_interval_ms / 1000.0
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.metadata = Metadata(ConsumerConfig({"bootstrap.servers": bootstrap}),
                                 client_id=client_id)
        self.member_id = ""
        self.generation = -1
        self.leader_id = ""
        self.need_rejoin = threading.Event()
        self.need_rejoin.set()
        self._coordinator: BrokerConnection | None = None
        self._lock = threading.RLock()
        self._closed = threading.Event()
        self._heartbeat = threading.Thread(target=self._heartbeat_loop, daemon=True,
                                           name=f"connect-heartbeat | {group_id}")
        self._heartbeat.start()

    def _request(self, key: ApiKey, body: Any, *, broker_wait_ms: int = 0) -> Any:
        with self._lock:
            if self._coordinator is None or not self._coordinator.connected:
                request_cls = api.APIS[ApiKey.FIND_COORDINATOR].request
                found = self.metadata.request_any(
                    ApiKey.FIND_COORDINATOR, request_cls(key=self.group_id, key_type=0),
                    timeout_s=10)
                if found.error_code != NONE:
                    raise error_for_code(found.error_code)(f"FindCoordinator {self.group_id}")
                self._coordinator = BrokerConnection(found.host, found.port,
                                                     node_id=found.node_id,
                                                     client_id=self.client_id)
            try:
                _, response = self._coordinator.request(key, body,
                                                        broker_wait_ms=broker_wait_ms)
            except KafkaError:
                self._coordinator.close()
                self._coordinator = None
                raise
            return response

    def join(self, metadata: dict[str, Any], assignor: Assignor) -> dict[str, Any]:
        """Join and sync (retrying until it works); this member's assignment."""
        while not self._closed.is_set():
            try:
                return self._join_once(metadata, assignor)
            except KafkaError as exc:
                if isinstance(exc, NotCoordinatorError | CoordinatorNotAvailableError):
                    with self._lock:
                        if self._coordinator is not None:
                            self._coordinator.close()
                        self._coordinator = None
                if isinstance(exc, UnknownMemberIdError):
                    self.member_id = ""
                logger.info("Joining group %s: %s, retrying", self.group_id, exc)
                time.sleep(0.2)
        raise KafkaError("the worker is stopping")

    def _join_once(self, metadata: dict[str, Any], assignor: Assignor) -> dict[str, Any]:
        self.need_rejoin.clear()
        self.generation = -1  # no heartbeats while joining
        join_cls = api.APIS[ApiKey.JOIN_GROUP].request
        body = join_cls(
            group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id,
            group_instance_id=None, protocol_type=PROTOCOL_TYPE,
            protocols=[join_cls.structs["JoinGroupRequestProtocol"](
                name=PROTOCOL, metadata=json.dumps(metadata).encode())])
        response = self._request(ApiKey.JOIN_GROUP, body,
                                 broker_wait_ms=self.rebalance_timeout_ms)
        if response.error_code == MemberIdRequiredError.code:
            self.member_id = response.member_id
            raise MemberIdRequiredError("The group coordinator handed out a member id")
        if response.error_code != NONE:
            raise error_for_code(response.error_code)(f"JoinGroup of group {self.group_id}")
        self.member_id = response.member_id
        self.leader_id = response.leader
        sync_cls = api.APIS[ApiKey.SYNC_GROUP].request
        assignments = []
        if self.member_id == self.leader_id:
            members = {m.member_id: json.loads(m.metadata) for m in response.members}
            assignments = [sync_cls.structs["SyncGroupRequestAssignment"](
                member_id=member, assignment=json.dumps(a).encode())
                for member, a in assignor(self.leader_id, members).items()]
        sync = sync_cls(group_id=self.group_id, generation_id=response.generation_id,
                        member_id=self.member_id, group_instance_id=None,
                        protocol_type=PROTOCOL_TYPE, protocol_name=PROTOCOL,
                        assignments=assignments)
        answer = self._request(ApiKey.SYNC_GROUP, sync, broker_wait_ms=self.rebalance_timeout_ms)
        if answer.error_code != NONE:
            raise error_for_code(answer.error_code)(f"SyncGroup of group {self.group_id}: "
                                                    f"{error_for_code(answer.error_code).name}")
        self.generation = response.generation_id
        assignment: dict[str, Any] = json.loads(answer.assignment)
        logger.info("Joined group %s at generation %d as %s: %s", self.group_id,
                    self.generation, self.member_id, assignment)
        return assignment

    def _heartbeat_loop(self) -> None:
        request_cls = api.APIS[ApiKey.HEARTBEAT].request
        while not self._closed.wait(self.heartbeat_interval_s):
            generation = self.generation
            if generation < 0 or self.need_rejoin.is_set():
                continue
            try:
                response = self._request(ApiKey.HEARTBEAT, request_cls(
                    group_id=self.group_id, generation_id=generation,
                    member_id=self.member_id, group_instance_id=None))
            except KafkaError as exc:
                logger.debug("heartbeat failed: %s", exc)
                continue
            if response.error_code in (RebalanceInProgressError.code,
                                       IllegalGenerationError.code,
                                       UnknownMemberIdError.code):
                if self.generation == generation:
                    if response.error_code == UnknownMemberIdError.code:
                        self.member_id = ""
                    self.need_rejoin.set()

    def close(self) -> None:
        self._closed.set()
        if self.member_id:
            request_cls = api.APIS[ApiKey.LEAVE_GROUP].request
            try:
                self._request(ApiKey.LEAVE_GROUP, request_cls(
                    group_id=self.group_id, member_id=self.member_id,
                    members=[request_cls.structs["MemberIdentity"](
                        member_id=self.member_id, group_instance_id=None)]))
            except KafkaError as exc:
                logger.debug("LeaveGroup failed: %s", exc)
        self._heartbeat.join(5)
        with self._lock:
            if self._coordinator is not None:
                self._coordinator.close()
