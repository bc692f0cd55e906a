"""The controller's partition and replica state machines (Kafka's PartitionStateMachine
and ReplicaStateMachine).

Legal transitions are data (``PARTITION_TRANSITIONS``, ``REPLICA_TRANSITIONS``: target state
-> the states it may be entered from). A change to a state not allowed from the current one
is refused: it is logged as an error, reported as an ``IllegalStateTransitionError`` in the
result, and the partition or replica keeps its state.

Each ``handle_state_changes`` call collects the broker requests it implies in one
``ControllerBrokerRequestBatch`` and sends them at the end. Every ZooKeeper write is guarded
by the controller epoch's zkVersion (a deposed controller's write fails with
ControllerMovedError, which propagates).

A leader election or an ISR removal writes each partition's state conditionally on its
zkVersion. Its first attempt starts from the states the controller holds (read at failover,
kept as it writes them) instead of reading every state znode again as Kafka does; a state
that changed meanwhile (a leader's ISR change) fails its version check and is read and
retried, so the outcome is Kafka's, with one ZooKeeper read per partition fewer in the
common case (thousands at a failover or a controlled shutdown).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from kazoo.exceptions import NodeExistsError, NoNodeError

from kafkaclone.common.log_summary import EXAMPLES, each_level, examples, summarized
from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.controller.channel_manager import ControllerBrokerRequestBatch
from kafkaclone.controller.context import (
    ControllerContext,
    PartitionAndReplica,
    PartitionState,
    ReplicaState,
)
from kafkaclone.controller.election import (
    ElectionStrategy,
    controlled_shutdown_partition_leader_election,
    offline_partition_leader_election,
    preferred_replica_partition_leader_election,
    reassign_partition_leader_election,
)
from kafkaclone.network.pacing import Pacer
from kafkaclone.zk.client import KafkaZkClient
from kafkaclone.zk.znodes import LeaderAndIsr, LeaderIsrAndControllerEpoch

logger = logging.getLogger(__name__)
state_change_logger = logging.getLogger("kafkaclone.controller.state_change")

UNCLEAN_LEADER_ELECTION_ENABLE: Final = "unclean.leader.election.enable"
MAX_ZK_WRITE_ATTEMPTS: Final = 20
"""How often a partition state write is retried after losing a race on its zkVersion."""

P = PartitionState
R = ReplicaState

PARTITION_TRANSITIONS: Final[Mapping[PartitionState, frozenset[PartitionState]]] = {
    P.NEW: frozenset({P.NON_EXISTENT}),
    P.ONLINE: frozenset({P.NEW, P.ONLINE, P.OFFLINE}),
    P.OFFLINE: frozenset({P.NEW, P.ONLINE, P.OFFLINE}),
    P.NON_EXISTENT: frozenset({P.OFFLINE}),
}
"""Target partition state -> the states it may be entered from."""

REPLICA_TRANSITIONS: Final[Mapping[ReplicaState, frozenset[ReplicaState]]] = {
    R.NEW: frozenset({R.NON_EXISTENT}),
    R.ONLINE: frozenset({R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE}),
    R.OFFLINE: frozenset({R.NEW, R.ONLINE, R.OFFLINE, R.DELETION_INELIGIBLE}),
    R.DELETION_STARTED: frozenset({R.OFFLINE}),
    R.DELETION_SUCCESSFUL: frozenset({R.DELETION_STARTED}),
    R.DELETION_INELIGIBLE: frozenset({R.OFFLINE, R.DELETION_STARTED}),
    R.NON_EXISTENT: frozenset({R.DELETION_SUCCESSFUL}),
}
"""Target replica state -> the states it may be entered from."""


class IllegalStateTransitionError(RuntimeError):
    """A state change the transition table does not allow."""


class StateChangeFailedError(RuntimeError):
    """A legal state change that could not be made (no live replica, no eligible leader,
    a state znode missing or written by a newer controller)."""


def check_partition_transition(tp: TopicPartition, current: PartitionState,
                               target: PartitionState) -> None:
    if current not in PARTITION_TRANSITIONS[target]:
        raise IllegalStateTransitionError(
            f"Partition {tp} should be in one of "
            f"{sorted(s.value for s in PARTITION_TRANSITIONS[target])} states before moving "
            f"to {target.value} state. Instead it is in {current.value} state")


def check_replica_transition(replica: PartitionAndReplica, current: ReplicaState,
                             target: ReplicaState) -> None:
    if current not in REPLICA_TRANSITIONS[target]:
        raise IllegalStateTransitionError(
            f"Replica {replica} should be in the "
            f"{','.join(sorted(s.value for s in REPLICA_TRANSITIONS[target]))} states before "
            f"moving to {target.value} state. Instead it is in {current.value} state")


@dataclass(frozen=True)
class _ElectionResult:
    leader_and_isr: LeaderAndIsr | None
    recipients: tuple[int, ...]


def _with_state(leader_and_isr: LeaderAndIsr | None) -> str:
    if leader_and_isr is None:
        return ""
    return (f" with state (leader={leader_and_isr.leader}, leader_epoch="
            f"{leader_and_isr.leader_epoch}, isr={list(leader_and_isr.isr)})")


def _transition(tp: TopicPartition, current: PartitionState,
                leader_and_isr: LeaderAndIsr | None) -> str:
    """A partition's change in a summary line of the state change log."""
    return f"{tp} from {current.value}{_with_state(leader_and_isr)}"


class PartitionStateMachine:
    def __init__(self, controller_id: int, context: ControllerContext, zk_client: KafkaZkClient,
                 batch: ControllerBrokerRequestBatch, unclean_leader_election_default: bool,
                 pacer: Pacer | None = None) -> None:
        self.controller_id = controller_id
        self.context = context
        self.zk_client = zk_client
        self.batch = batch
        self.unclean_leader_election_default = unclean_leader_election_default
        self.pacer = pacer or Pacer.never()
        """Loops over every partition give the reactor a turn now and then (see
        ``kafkaclone.network.pacing``)."""

    async def startup(self) -> None:
        """Set every partition's initial state from the leadership read at failover, then
        elect leaders for those without one."""
        pacer = self.pacer
        for tp in self.context.all_partitions():
            if pacer.due:
                await pacer.turn()
            state = self.context.partition_leadership_info.get(tp)
            if state is None:
                self.context.partition_states[tp] = P.NEW
            elif self.context.is_replica_online(state.leader_and_isr.leader, tp,
                                                include_shutting_down_brokers=True):
                self.context.partition_states[tp] = P.ONLINE
            else:
                self.context.partition_states[tp] = P.OFFLINE
        await self.trigger_online_partition_state_change()

    async def trigger_online_partition_state_change(self,
                                                    topics: Iterable[str] | None = None) -> None:
        """Elect leaders for every New or Offline partition (of ``topics``), except those of
        topics being deleted."""
        wanted = None if topics is None else set(topics)
        partitions = [
            tp for tp, state in sorted(self.context.partition_states.items())
            if state in (P.NEW, P.OFFLINE)
            and not self.context.is_topic_queued_up_for_deletion(tp.topic)
            and (wanted is None or tp.topic in wanted)
        ]
        await self.handle_state_changes(partitions, P.ONLINE, ElectionStrategy.OFFLINE)

    async def handle_state_changes(
        self, partitions: Sequence[TopicPartition], target: PartitionState,
        strategy: ElectionStrategy | None = None,
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        """Move ``partitions`` to ``target``. For OnlinePartition, the LeaderAndIsr written
        per elected partition; every failure (illegal or failed change) as an exception."""
        if not partitions:
            return {}
        self.batch.new_batch()
        try:
            result = await self._do_handle_state_changes(list(partitions), target, strategy)
            self.batch.send_requests_to_brokers(self.context.epoch)
        finally:
            self.batch.clear()
        return result

    async def _do_handle_state_changes(
        self, partitions: list[TopicPartition], target: PartitionState,
        strategy: ElectionStrategy | None,
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        result: dict[TopicPartition, LeaderAndIsr | Exception] = {}
        valid: list[TopicPartition] = []
        pacer = self.pacer
        for tp in partitions:
            if pacer.due:
                await pacer.turn()
            current = self.context.partition_state(tp)
            try:
                check_partition_transition(tp, current, target)
            except IllegalStateTransitionError as exc:
                state_change_logger.error("Controller %s epoch %s failed to change state for "
                                          "partition %s: %s", self.controller_id,
                                          self.context.epoch, tp, exc)
                result[tp] = exc
            else:
                valid.append(tp)
        if target == P.ONLINE:
            uninitialized = [tp for tp in valid if self.context.partition_state(tp) == P.NEW]
            to_elect = [tp for tp in valid if self.context.partition_state(tp) != P.NEW]
            changed: list[tuple[TopicPartition, PartitionState, LeaderAndIsr | None]] = []
            if uninitialized:
                initialized = await self._initialize_leader_and_isr_for_partitions(uninitialized)
                for tp, outcome in initialized.items():
                    if not isinstance(outcome, Exception):
                        changed.append((tp, self.context.partition_state(tp), outcome))
                        self.context.partition_states[tp] = P.ONLINE
                    result[tp] = outcome
            if to_elect:
                elected = await self._elect_leader_for_partitions(
                    to_elect, strategy or ElectionStrategy.OFFLINE)
                for tp, outcome in elected.items():
                    if pacer.due:
                        await pacer.turn()
                    if not isinstance(outcome, Exception):
                        changed.append((tp, self.context.partition_state(tp), outcome))
                        self.context.partition_states[tp] = P.ONLINE
                    result[tp] = outcome
            self._log_transitions(changed, target)
        else:
            changed = [(tp, self.context.partition_state(tp), None) for tp in valid]
            for tp in valid:
                self.context.partition_states[tp] = target
            self._log_transitions(changed, target)
        return result

    @staticmethod
    def _log_transitions(
        changed: Sequence[tuple[TopicPartition, PartitionState, LeaderAndIsr | None]],
        target: PartitionState,
    ) -> None:
        """Kafka's "Changed partition" line per partition, or past ``EXAMPLES`` of them one
        line for all (each at DEBUG): a line per partition held the reactor thread for
        seconds at 10,000 of them."""
        level = each_level(len(changed), logging.INFO)
        if state_change_logger.isEnabledFor(level):
            for tp, current, leader_and_isr in changed:
                state_change_logger.log(level, "Changed partition %s from %s to %s%s", tp,
                                        current.value, target.value,
                                        _with_state(leader_and_isr))
        if summarized(len(changed)):
            state_change_logger.info(
                "Changed %d partitions to %s: %s", len(changed), target.value,
                examples([_transition(*change) for change in changed[:EXAMPLES + 1]]))

    async def _initialize_leader_and_isr_for_partitions(
        self, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        """New -> Online: leader = the first live replica, ISR = the live replicas, leader
        epoch 0, written as the partition's state znode."""
        result: dict[TopicPartition, LeaderAndIsr | Exception] = {}
        to_create: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for tp in partitions:
            replicas = self.context.partition_replica_assignment(tp)
            live = [r for r in replicas if self.context.is_replica_online(r, tp)]
            if not live:
                no_replica = StateChangeFailedError(
                    f"Controller {self.controller_id} epoch {self.context.epoch} encountered "
                    f"error during state change of partition {tp} from New to Online, assigned "
                    f"replicas are [{','.join(map(str, replicas))}], live brokers are "
                    f"[{','.join(map(str, sorted(self.context.live_broker_ids)))}]. No assigned "
                    "replica is alive.")
                state_change_logger.error("%s", no_replica)
                result[tp] = no_replica
                continue
            to_create[tp] = LeaderIsrAndControllerEpoch(LeaderAndIsr.initial(live[0], live),
                                                        self.context.epoch)
        if not to_create:
            return result
        outcomes = await self.zk_client.create_topic_partition_states(
            to_create, self.context.epoch_zk_version)
        for tp, error in outcomes.items():
            state = to_create[tp]
            if error is None:
                self.context.partition_leadership_info[tp] = state
                self.batch.add_leader_and_isr_request_for_brokers(
                    self.context.partition_replica_assignment(tp), tp, state, is_new=True)
                result[tp] = state.leader_and_isr
            else:
                if isinstance(error, NodeExistsError):
                    message = (f"Encountered error while changing partition {tp}'s state from "
                               "New to Online since LeaderAndIsr path already exists with "
                               "value "
                               f"{await self.zk_client.get_topic_partition_state(tp)} and "
                               f"controller epoch {self.context.epoch}")
                    failure: Exception = StateChangeFailedError(message)
                else:
                    failure = error
                state_change_logger.error("%s", failure)
                result[tp] = failure
        return result

    async def _elect_leader_for_partitions(
        self, partitions: list[TopicPartition], strategy: ElectionStrategy
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        finished: dict[TopicPartition, LeaderAndIsr | Exception] = {}
        remaining = partitions
        for attempt in range(MAX_ZK_WRITE_ATTEMPTS):
            if not remaining:
                break
            done, remaining = await self._do_elect_leader_for_partitions(
                remaining, strategy, from_cache=attempt == 0)
            failed = [(tp, outcome) for tp, outcome in done.items()
                      if isinstance(outcome, Exception)]
            # Thousands fail together (no live replica in their ISR): one ERROR line then,
            # each at DEBUG.
            level = each_level(len(failed), logging.ERROR)
            if state_change_logger.isEnabledFor(level):
                for tp, outcome in failed:
                    state_change_logger.log(
                        level, "Controller %s epoch %s failed to change state for partition %s "
                        "from %s to OnlinePartition: %s", self.controller_id,
                        self.context.epoch, tp, self.context.partition_state(tp).value, outcome)
            if summarized(len(failed)):
                state_change_logger.error(
                    "Controller %s epoch %s failed to change state for %d partitions to "
                    "OnlinePartition: %s", self.controller_id, self.context.epoch, len(failed),
                    examples([f"{tp} ({outcome})" for tp, outcome in failed]))
            finished.update(done)
            if remaining:
                logger.info("Retrying leader election with strategy %s for %d partitions (%s)",
                            strategy.value, len(remaining), examples(remaining))
        for tp in remaining:
            finished[tp] = StateChangeFailedError(
                f"gave up electing a leader for {tp} after {MAX_ZK_WRITE_ATTEMPTS} attempts")
        return finished

    async def _do_elect_leader_for_partitions(
        self, partitions: list[TopicPartition], strategy: ElectionStrategy,
        from_cache: bool = False,
    ) -> tuple[dict[TopicPartition, LeaderAndIsr | Exception], list[TopicPartition]]:
        finished: dict[TopicPartition, LeaderAndIsr | Exception] = {}
        current = await current_partition_states(self.context, self.zk_client, partitions,
                                                 finished, from_cache)
        if not current:
            return finished, []
        if strategy == ElectionStrategy.OFFLINE:
            elections = await self._leader_for_offline(current)
        elif strategy == ElectionStrategy.OFFLINE_UNCLEAN:
            elections = await self._leader_for_offline(current, allow_unclean=True)
        elif strategy == ElectionStrategy.CONTROLLED_SHUTDOWN:
            elections = self._leader_for_controlled_shutdown(current)
        elif strategy == ElectionStrategy.REASSIGN:
            elections = self._leader_for_reassign(current)
        else:
            elections = self._leader_for_preferred(current)
        to_write: dict[TopicPartition, LeaderAndIsr] = {}
        unsure: list[TopicPartition] = []
        for tp, election in elections.items():
            if election.leader_and_isr is None and from_cache:
                unsure.append(tp)  # nothing to write would tell a stale state: read it
            elif election.leader_and_isr is None:
                finished[tp] = StateChangeFailedError(
                    f"Failed to elect leader for partition {tp} under strategy "
                    f"{strategy.value}")
            else:
                to_write[tp] = election.leader_and_isr
        if not to_write:
            return finished, unsure
        update = await self.zk_client.update_leader_and_isr(
            to_write, self.context.epoch, self.context.epoch_zk_version)
        retry = unsure + list(update.partitions_to_retry)
        pacer = self.pacer
        for tp, outcome in update.finished_partitions.items():
            if pacer.due:
                await pacer.turn()
            if isinstance(outcome, Exception):
                if from_cache and isinstance(outcome, NoNodeError):
                    retry.append(tp)  # read: the failure says why
                else:
                    finished[tp] = outcome
                continue
            state = LeaderIsrAndControllerEpoch(outcome, self.context.epoch)
            self.context.partition_leadership_info[tp] = state
            self.batch.add_leader_and_isr_request_for_brokers(
                elections[tp].recipients, tp, state, is_new=False)
            finished[tp] = outcome
        return finished, retry

    async def _unclean_enabled(self, topics: set[str]) -> dict[str, bool]:
        if not topics:
            return {}
        configs = await self.zk_client.get_topic_configs(topics)
        result = {}
        for topic in topics:
            value = configs.get(topic, {}).get(UNCLEAN_LEADER_ELECTION_ENABLE)
            result[topic] = (self.unclean_leader_election_default if value is None
                             else value.strip().lower() == "true")
        return result

    async def _leader_for_offline(
        self, current: dict[TopicPartition, LeaderAndIsr], allow_unclean: bool = False
    ) -> dict[TopicPartition, _ElectionResult]:
        """The offline election; unclean where the topic allows it, or everywhere with
        ``allow_unclean`` (an admin asked for it)."""
        live_replicas: dict[TopicPartition, list[int]] = {}
        needs_unclean_check: set[str] = set()
        for tp, lai in current.items():
            assignment = self.context.partition_replica_assignment(tp)
            live = [r for r in assignment if self.context.is_replica_online(r, tp)]
            live_replicas[tp] = live
            if not any(r in lai.isr for r in live):
                needs_unclean_check.add(tp.topic)
        unclean = ({topic: True for topic in needs_unclean_check} if allow_unclean
                   else await self._unclean_enabled(needs_unclean_check))
        result = {}
        for tp, lai in current.items():
            assignment = self.context.partition_replica_assignment(tp)
            live = live_replicas[tp]
            leader = offline_partition_leader_election(assignment, lai.isr, live,
                                                       unclean.get(tp.topic, False))
            if leader is None:
                result[tp] = _ElectionResult(None, assignment)
                continue
            if leader in lai.isr:
                new_isr = [r for r in lai.isr if self.context.is_replica_online(r, tp)]
            else:
                logger.warning(
                    "Unclean leader election. Partition %s has been assigned leader %s from "
                    "deposed leader %s: data loss is possible (replicas not in the ISR %s "
                    "may lack committed messages)", tp, leader, lai.leader, list(lai.isr))
                new_isr = [leader]
            result[tp] = _ElectionResult(lai.new_leader_and_isr(leader, new_isr), assignment)
        return result

    def _leader_for_controlled_shutdown(
        self, current: dict[TopicPartition, LeaderAndIsr]
    ) -> dict[TopicPartition, _ElectionResult]:
        shutting_down = self.context.shutting_down_broker_ids
        result = {}
        for tp, lai in current.items():
            assignment = self.context.partition_replica_assignment(tp)
            live_or_shutting_down = tuple(
                r for r in assignment
                if self.context.is_replica_online(r, tp, include_shutting_down_brokers=True))
            leader = controlled_shutdown_partition_leader_election(
                assignment, lai.isr, live_or_shutting_down, shutting_down)
            new_isr = [r for r in lai.isr if r not in shutting_down]
            result[tp] = _ElectionResult(
                None if leader is None else lai.new_leader_and_isr(leader, new_isr),
                live_or_shutting_down)
        return result

    def _leader_for_reassign(
        self, current: dict[TopicPartition, LeaderAndIsr]
    ) -> dict[TopicPartition, _ElectionResult]:
        """Kafka's leaderForReassign: the first target replica live and in the ISR, the ISR
        kept; the LeaderAndIsr goes to the target replicas."""
        result = {}
        for tp, lai in current.items():
            target = self.context.partition_full_replica_assignment(tp).target_replicas
            live = [r for r in target if self.context.is_replica_online(r, tp)]
            leader = reassign_partition_leader_election(target, lai.isr, live)
            result[tp] = _ElectionResult(
                None if leader is None else lai.new_leader_and_isr(leader, lai.isr), target)
        return result

    def _leader_for_preferred(
        self, current: dict[TopicPartition, LeaderAndIsr]
    ) -> dict[TopicPartition, _ElectionResult]:
        result = {}
        for tp, lai in current.items():
            assignment = self.context.partition_replica_assignment(tp)
            live = [r for r in assignment if self.context.is_replica_online(r, tp)]
            leader = preferred_replica_partition_leader_election(assignment, lai.isr, live)
            result[tp] = _ElectionResult(
                None if leader is None else lai.new_leader_and_isr(leader, lai.isr), assignment)
        return result


async def current_partition_states(
    context: ControllerContext, zk_client: KafkaZkClient, partitions: list[TopicPartition],
    failures: dict[TopicPartition, LeaderAndIsr | Exception], from_cache: bool,
) -> dict[TopicPartition, LeaderAndIsr]:
    """The partitions' states to write from: with ``from_cache``, those the controller
    holds (their zkVersions make a stale one fail its write, to be read and retried), the
    others read as ``read_partition_states``."""
    if not from_cache:
        return await read_partition_states(context, zk_client, partitions, failures)
    current: dict[TopicPartition, LeaderAndIsr] = {}
    unknown: list[TopicPartition] = []
    for tp in partitions:
        state = context.partition_leadership_info.get(tp)
        if state is None:
            unknown.append(tp)
        else:
            current[tp] = state.leader_and_isr
    if unknown:
        current.update(await read_partition_states(context, zk_client, unknown, failures))
    return current


async def read_partition_states(
    context: ControllerContext, zk_client: KafkaZkClient, partitions: list[TopicPartition],
    failures: dict[TopicPartition, LeaderAndIsr | Exception],
) -> dict[TopicPartition, LeaderAndIsr]:
    """The partitions' states from ZooKeeper; a missing one, or one written by a newer
    controller, goes to ``failures``."""
    states = await zk_client.get_topic_partition_states(partitions)
    current: dict[TopicPartition, LeaderAndIsr] = {}
    for tp in partitions:
        state = states.get(tp)
        if state is None:
            failures[tp] = StateChangeFailedError(
                f"LeaderAndIsr information doesn't exist for partition {tp} in ZooKeeper")
        elif state.controller_epoch > context.epoch:
            failures[tp] = StateChangeFailedError(
                f"Leader and isr path written by another controller. This probably means "
                f"that the current controller {context.epoch} went through a soft failure "
                f"and another controller was elected with epoch {state.controller_epoch}.")
        else:
            current[tp] = state.leader_and_isr
    return current


class ReplicaStateMachine:
    def __init__(self, controller_id: int, context: ControllerContext, zk_client: KafkaZkClient,
                 batch: ControllerBrokerRequestBatch, pacer: Pacer | None = None) -> None:
        self.controller_id = controller_id
        self.context = context
        self.zk_client = zk_client
        self.batch = batch
        self.pacer = pacer or Pacer.never()
        """As the partition state machine's."""

    async def startup(self) -> None:
        """Online replicas on live brokers (each sent a LeaderAndIsr), the rest Offline."""
        online: list[PartitionAndReplica] = []
        offline: list[PartitionAndReplica] = []
        pacer = self.pacer
        for tp in self.context.all_partitions():
            if pacer.due:
                await pacer.turn()
            for replica in self.context.partition_replica_assignment(tp):
                pr = PartitionAndReplica(tp, replica)
                if self.context.is_replica_online(replica, tp,
                                                  include_shutting_down_brokers=True):
                    self.context.replica_states[pr] = R.ONLINE
                    online.append(pr)
                else:
                    self.context.replica_states[pr] = R.DELETION_INELIGIBLE
                    offline.append(pr)
        await self.handle_state_changes(online, R.ONLINE)
        await self.handle_state_changes(offline, R.OFFLINE)

    async def handle_state_changes(self, replicas: Sequence[PartitionAndReplica],
                                   target: ReplicaState) -> dict[PartitionAndReplica, Exception]:
        """Move ``replicas`` to ``target``; the replicas whose change failed, with why."""
        if not replicas:
            return {}
        self.batch.new_batch()
        failures: dict[PartitionAndReplica, Exception] = {}
        try:
            by_broker: dict[int, list[PartitionAndReplica]] = {}
            for replica in replicas:
                by_broker.setdefault(replica.replica, []).append(replica)
            for broker_id, broker_replicas in sorted(by_broker.items()):
                failures.update(await self._do_handle_state_changes(broker_id, broker_replicas,
                                                                    target))
            self.batch.send_requests_to_brokers(self.context.epoch)
        finally:
            self.batch.clear()
        return failures

    def _set(self, replica: PartitionAndReplica, target: ReplicaState) -> None:
        state_change_logger.debug("Changed state of replica %s from %s to %s", replica,
                                  self.context.replica_state(replica).value, target.value)
        self.context.replica_states[replica] = target

    async def _do_handle_state_changes(self, broker_id: int, replicas: list[PartitionAndReplica],
                                       target: ReplicaState
                                       ) -> dict[PartitionAndReplica, Exception]:
        failures: dict[PartitionAndReplica, Exception] = {}
        valid: list[PartitionAndReplica] = []
        pacer = self.pacer
        for replica in replicas:
            if pacer.due:
                await pacer.turn()
            current = self.context.replica_state(replica)
            try:
                check_replica_transition(replica, current, target)
            except IllegalStateTransitionError as exc:
                state_change_logger.error("Controller %s epoch %s initiated state change of "
                                          "replica %s to %s failed: %s", self.controller_id,
                                          self.context.epoch, replica, target.value, exc)
                failures[replica] = exc
            else:
                valid.append(replica)
        ctx = self.context
        if target == R.NEW:
            for replica in valid:
                tp = replica.topic_partition
                state = ctx.partition_leadership_info.get(tp)
                if state is not None and state.leader_and_isr.leader == broker_id:
                    failures[replica] = StateChangeFailedError(
                        f"Replica {broker_id} for partition {tp} cannot be moved to NewReplica "
                        "state as it is being requested to become leader")
                    continue
                if state is not None:
                    self.batch.add_leader_and_isr_request_for_brokers([broker_id], tp, state,
                                                                      is_new=True)
                self._set(replica, R.NEW)
        elif target == R.ONLINE:
            for replica in valid:
                if pacer.due:
                    await pacer.turn()
                tp = replica.topic_partition
                if ctx.replica_state(replica) != R.NEW:
                    state = ctx.partition_leadership_info.get(tp)
                    if state is not None:
                        self.batch.add_leader_and_isr_request_for_brokers([broker_id], tp, state,
                                                                          is_new=False)
                self._set(replica, R.ONLINE)
        elif target == R.OFFLINE:
            for replica in valid:
                if pacer.due:
                    await pacer.turn()
                self.batch.add_stop_replica_request_for_brokers(
                    [broker_id], replica.topic_partition, delete_partition=False)
            with_leadership = [r.topic_partition for r in valid
                               if r.topic_partition in ctx.partition_leadership_info]
            updated = await self._remove_replicas_from_isr(broker_id, with_leadership, failures)
            for tp, state in updated.items():
                if pacer.due:
                    await pacer.turn()
                if not ctx.is_topic_queued_up_for_deletion(tp.topic):
                    recipients = [r for r in ctx.partition_replica_assignment(tp)
                                  if r != broker_id]
                    self.batch.add_leader_and_isr_request_for_brokers(recipients, tp, state,
                                                                      is_new=False)
                self._set(PartitionAndReplica(tp, broker_id), R.OFFLINE)
            for replica in valid:
                if replica.topic_partition not in ctx.partition_leadership_info:
                    self.batch.add_update_metadata_request_for_brokers(
                        ctx.live_or_shutting_down_broker_ids, [replica.topic_partition])
                    self._set(replica, R.OFFLINE)
        elif target == R.DELETION_STARTED:
            for replica in valid:
                self._set(replica, R.DELETION_STARTED)
                self.batch.add_stop_replica_request_for_brokers(
                    [broker_id], replica.topic_partition, delete_partition=True)
        elif target in (R.DELETION_INELIGIBLE, R.DELETION_SUCCESSFUL):
            for replica in valid:
                self._set(replica, target)
        else:  # NonExistentReplica: forget the replica
            for replica in valid:
                tp = replica.topic_partition
                assignment = ctx.partition_full_replica_assignment(tp)
                ctx.update_partition_full_replica_assignment(tp, type(assignment)(
                    tuple(r for r in assignment.replicas if r != broker_id),
                    tuple(r for r in assignment.adding_replicas if r != broker_id),
                    tuple(r for r in assignment.removing_replicas if r != broker_id)))
                ctx.replica_states.pop(replica, None)
        return failures

    async def _remove_replicas_from_isr(
        self, broker_id: int, partitions: list[TopicPartition],
        failures: dict[PartitionAndReplica, Exception],
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """Take ``broker_id`` out of the partitions' ISRs (and leadership) in ZooKeeper. The
        ISR is never emptied: a last member stays, and a partition it led gets leader -1."""
        result: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        remaining = partitions
        for attempt in range(MAX_ZK_WRITE_ATTEMPTS):
            if not remaining:
                break
            errors: dict[TopicPartition, LeaderAndIsr | Exception] = {}
            current = await current_partition_states(self.context, self.zk_client, remaining,
                                                     errors, from_cache=attempt == 0)
            for tp, error in errors.items():
                if (isinstance(error, Exception)
                        and not self.context.is_topic_queued_up_for_deletion(tp.topic)):
                    failures[PartitionAndReplica(tp, broker_id)] = error
            adjusted: dict[TopicPartition, LeaderAndIsr] = {}
            unsure: list[TopicPartition] = []
            for tp, lai in current.items():
                if broker_id not in lai.isr and attempt == 0:
                    unsure.append(tp)  # nothing to write would tell a stale state: read it
                    continue
                if broker_id not in lai.isr:
                    state = LeaderIsrAndControllerEpoch(lai, self.context.epoch)
                    self.context.partition_leadership_info[tp] = state
                    result[tp] = state
                    continue
                new_leader = LeaderAndIsr.NO_LEADER if lai.leader == broker_id else lai.leader
                new_isr = lai.isr if len(lai.isr) == 1 else [r for r in lai.isr
                                                             if r != broker_id]
                adjusted[tp] = lai.new_leader_and_isr(new_leader, new_isr)
            if not adjusted:
                remaining = unsure
                continue
            update = await self.zk_client.update_leader_and_isr(
                adjusted, self.context.epoch, self.context.epoch_zk_version)
            remaining = unsure + list(update.partitions_to_retry)
            for tp, outcome in update.finished_partitions.items():
                if isinstance(outcome, Exception):
                    if attempt == 0 and isinstance(outcome, NoNodeError):
                        remaining.append(tp)  # read: the failure says why
                    else:
                        failures[PartitionAndReplica(tp, broker_id)] = outcome
                    continue
                state = LeaderIsrAndControllerEpoch(outcome, self.context.epoch)
                self.context.partition_leadership_info[tp] = state
                result[tp] = state
        return result

