"""The transaction-log checks on dumps shaped like ZooKeeper 3.8's TxnLogToolkit output
(multi payloads carry 4-byte lengths, raw), so the scenarios' fencing assertions are known
to fail when the log shows a violation."""

from __future__ import annotations

import json

from . import zktxn

OLD, NEW = 0x100, 0x200  # two brokers' sessions


def header(session: int, zxid: int) -> str:
    return f"11/24/26, 7:08:09 AM UTC session {session:#x} cxid 0x1 zxid {zxid:#x} "


def length(payload: str) -> str:
    return "\x00\x00\x00" + chr(len(payload))


def elect_controller(session: int, zxid: int, broker: int, epoch: int) -> list[str]:
    record = json.dumps({"version": 1, "brokerid": broker, "timestamp": "1"})
    text = (header(session, zxid) + "multi create:" + length("/controller") + "\n/controller"
            + length(record) + record + "\x00\x00\x00\x01world\n;setData:"
            + length("/controller_epoch") + "/controller_epoch" + length(str(epoch))
            + str(epoch) + "\x00\x00\x00\x01")
    return text.split("\n")


def write_state(session: int, zxid: int, partition: int, leader: int, leader_epoch: int,
                controller_epoch: int, kind: str = "setData") -> list[str]:
    path = f"/brokers/topics/t/partitions/{partition}/state"
    state = json.dumps({"controller_epoch": controller_epoch, "leader": leader, "version": 1,
                        "leader_epoch": leader_epoch, "isr": [leader]})
    return [header(session, zxid) + "multi check:" + length("/controller_epoch")
            + "/controller_epoch;" + f"{kind}:" + length(path) + path + length(state) + state]


def noise() -> list[str]:
    return ["ZooKeeper Transactional Log File with dbid 0 txnlog format version 2",
            "[main] INFO org.apache.zookeeper.server.ZooKeeperServer - zookeeper.flushDelay"]


def test_parse_reads_sessions_paths_payloads_and_skips_failed_multis() -> None:
    lines = [
        *noise(),
        header(OLD, 1) + "createSession 6000",
        header(OLD, 2) + "create /controller_epoch,0,[31,s{'world,'anyone}",
        "],false,9",
        header(OLD, 3) + "multi create:\x00\x00\x00\x0e/brokers/ids/1\x00\x00\x00\x00",
        *elect_controller(OLD, 4, broker=1, epoch=1),
        *write_state(OLD, 5, 0, leader=1, leader_epoch=0, controller_epoch=1, kind="create"),
        header(NEW, 6) + "multi error:\x00\x00\x00\x00;error:\x00\x00\x00\x00",
        header(NEW, 7) + "error -110",
        "EOF reached after 7 txns.",
    ]
    txns = zktxn.parse(lines)
    assert [t.zxid for t in txns] == [1, 2, 3, 4, 5, 6, 7]
    assert zktxn.controller_epoch_writes(txns) == [(2, 0), (4, 1)]
    assert zktxn.sessions_registering(txns, 1) == {OLD}
    assert txns[3].writes[0].json()["brokerid"] == 1
    assert txns[4].writes[0].json()["leader"] == 1
    assert txns[5].writes == [] and txns[6].writes == []
    assert zktxn.partition_state_anomalies(txns) == []
    assert zktxn.writes_by(txns, {OLD}, after_zxid=3) == [
        (4, "create", "/controller"), (4, "setData", "/controller_epoch"),
        (5, "create", "/brokers/topics/t/partitions/0/state")]
    assert zktxn.writes_by(txns, {OLD}, 3, frozenset({"/controller", "/controller_epoch"})) \
        == [(5, "create", "/brokers/topics/t/partitions/0/state")]
    assert zktxn.writes_by(txns, {NEW}, 0) == []


def test_an_election_under_a_stale_controller_epoch_is_reported() -> None:
    lines = [
        *elect_controller(OLD, 1, broker=1, epoch=1),
        *write_state(OLD, 2, 0, leader=1, leader_epoch=0, controller_epoch=1, kind="create"),
        *elect_controller(NEW, 3, broker=2, epoch=2),
        # A leader's ISR change keeps its leader epoch: allowed with the epoch it knows.
        *write_state(OLD, 4, 0, leader=1, leader_epoch=0, controller_epoch=1),
        # The deposed controller electing a leader: a stale write that landed.
        *write_state(OLD, 5, 0, leader=3, leader_epoch=1, controller_epoch=1),
    ]
    problems = zktxn.partition_state_anomalies(zktxn.parse(lines))
    assert len(problems) == 1
    assert "elected leader 3 (leader epoch 1) under controller epoch 1" in problems[0]
    assert "current controller epoch was 2" in problems[0]


def test_two_leaders_in_one_leader_epoch_and_epochs_going_back_are_reported() -> None:
    lines = [
        *elect_controller(OLD, 1, broker=1, epoch=1),
        *write_state(OLD, 2, 0, leader=1, leader_epoch=3, controller_epoch=1, kind="create"),
        *elect_controller(NEW, 3, broker=2, epoch=2),
        *write_state(NEW, 4, 0, leader=2, leader_epoch=4, controller_epoch=2),
        *write_state(OLD, 5, 0, leader=1, leader_epoch=4, controller_epoch=1),
    ]
    problems = zktxn.partition_state_anomalies(zktxn.parse(lines))
    assert any("two leaders, 2 and 1, in leader epoch 4" in p for p in problems), problems
    assert any("controller epoch went back from 2 to 1" in p for p in problems), problems


def test_a_controller_write_from_another_session_is_reported() -> None:
    lines = [
        *elect_controller(OLD, 1, broker=1, epoch=1),
        *write_state(OLD, 2, 0, leader=1, leader_epoch=0, controller_epoch=1, kind="create"),
        *elect_controller(NEW, 3, broker=2, epoch=2),
        *write_state(NEW, 4, 0, leader=2, leader_epoch=1, controller_epoch=2),
    ]
    assert zktxn.foreign_controller_writes(zktxn.parse(lines)) == []
    # The old controller's guarded write landing after the new one took over.
    lines += write_state(OLD, 5, 1, leader=1, leader_epoch=0, controller_epoch=2,
                         kind="create")
    problems = zktxn.foreign_controller_writes(zktxn.parse(lines))
    assert problems == [f"zxid 0x5: session {OLD:#x} wrote "
                        f"/brokers/topics/t/partitions/1/state as controller; the "
                        f"controller's session was {NEW}"]


def test_merge_fills_one_members_gaps_from_the_others() -> None:
    first = zktxn.parse([*elect_controller(OLD, 1, broker=1, epoch=1),
                         *write_state(OLD, 3, 0, 1, 0, 1, kind="create")])
    second = zktxn.parse([*elect_controller(OLD, 1, broker=1, epoch=1),
                          *write_state(OLD, 2, 1, 1, 0, 1, kind="create")])
    assert [t.zxid for t in zktxn.merge(first, second)] == [1, 2, 3]
