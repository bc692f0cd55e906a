"""A Connect worker's membership in its ``group.id`` (Kafka's ``WorkerGroupMember`` and
the group half of ``WorkerCoordinator``): JoinGroup with protocol type ``connect`` and
the protocols the worker's ``connect.protocol`` offers (most preferred first, each with
its metadata bytes, see :mod:`kafkaclone.connect.connect_protocol`), the leader computes
the assignment for the protocol the coordinator chose, SyncGroup hands it out, a thread
heartbeats. What a member does with its assignment (stop everything first under the
eager protocol, keep running unrevoked work under the cooperative ones) is the herder's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
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

Protocols = Sequence[tuple[str, bytes]]
"""What a member offers: (protocol name, metadata), most preferred first."""
Assignor = Callable[[str, str, dict[str, bytes], int], dict[str, bytes]]
"""The leader's part: (the chosen protocol, the leader's member id, every member's metadata
for that protocol by member id, the new generation) -> each member's assignment."""


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
        self.last_completed_generation = -1
        """The generation of the last join that ended with an assignment (Kafka's
        ``lastCompletedGenerationId``): the leader trusts its memory of the previous
        assignment only if that is the generation it assigned."""
        self.protocol = ""
        """The protocol the coordinator chose at the last join."""
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

    def join(self, protocols: Callable[[], Protocols], assignor: Assignor) -> tuple[str, bytes]:
        """Join and sync (retrying until it works): the chosen protocol and this member's
        assignment. ``protocols`` is asked again at each attempt (the metadata carries the
        config offset, which moves)."""
        while not self._closed.is_set():
            try:
                return self._join_once(protocols(), assignor)
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

    def _join_once(self, protocols: Protocols, assignor: Assignor) -> tuple[str, bytes]:
        self.need_rejoin.clear()
        self.generation = -1  # no heartbeats while joining
        join_cls = api.APIS[ApiKey.JOIN_GROUP].request
        body = join_cls(
            group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id,
            group_instance_id=None, protocol_type=PROTOCOL_TYPE,
            protocols=[join_cls.structs["JoinGroupRequestProtocol"](name=name, metadata=data)
                       for name, data in protocols])
        response = self._request(ApiKey.JOIN_GROUP, body,
                                 broker_wait_ms=self.rebalance_timeout_ms)
        if response.error_code == MemberIdRequiredError.code:
            self.member_id = response.member_id
            raise MemberIdRequiredError("The group coordinator handed out a member id")
        if response.error_code != NONE:
            raise error_for_code(response.error_code)(f"JoinGroup of group {self.group_id}")
        self.member_id = response.member_id
        self.leader_id = response.leader
        protocol = str(response.protocol_name)
        sync_cls = api.APIS[ApiKey.SYNC_GROUP].request
        assignments = []
        if self.member_id == self.leader_id:
            members = {m.member_id: bytes(m.metadata) for m in response.members}
            assignments = [sync_cls.structs["SyncGroupRequestAssignment"](
                member_id=member, assignment=data)
                for member, data in assignor(protocol, self.leader_id, members,
                                             response.generation_id).items()]
        sync = sync_cls(group_id=self.group_id, generation_id=response.generation_id,
                        member_id=self.member_id, group_instance_id=None,
                        protocol_type=PROTOCOL_TYPE, protocol_name=protocol,
                        assignments=assignments)
        answer = self._request(ApiKey.SYNC_GROUP, sync, broker_wait_ms=self.rebalance_timeout_ms)
        if answer.error_code != NONE:
            raise error_for_code(answer.error_code)(f"SyncGroup of group {self.group_id}: "
                                                    f"{error_for_code(answer.error_code).name}")
        self.generation = response.generation_id
        self.last_completed_generation = response.generation_id
        self.protocol = protocol
        logger.info("Joined group %s at generation %d as %s (leader %s) with protocol %s",
                    self.group_id, self.generation, self.member_id, self.leader_id, protocol)
        return protocol, bytes(answer.assignment)

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
