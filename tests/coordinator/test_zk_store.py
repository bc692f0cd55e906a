"""The ZooKeeper offset store and membership mirror against a real ZooKeeper: the legacy
decimal layout, one multi-op per commit, metadata beside the offset, encoded group ids."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kazoo.client import KazooClient

from kafkaclone.common.topic_partition import TopicPartition
from kafkaclone.coordinator.group.store import MembershipMirror, OffsetAndMetadata, ZkGroupStore
from kafkaclone.testing.reactor import run, run_until
from kafkaclone.testing.zookeeper import expire_session
from kafkaclone.zk.client import KafkaZkClient
from kafkaclone.zk.znodes import (
    ConsumerOffsetMetadataZNode,
    decode_znode_name,
    encode_znode_name,
)
from tests.zk.test_znodes import assert_valid

pytestmark = pytest.mark.timeout(60)


class CountingZkClient(KafkaZkClient):
    """Counts the multi-ops the store sends."""

    multis: list[int]

    async def multi(self, ops: Any) -> list[Any]:
        self.multis.append(len(ops))
        return await super().multi(ops)


@pytest.fixture
def store(zk_client: KafkaZkClient) -> ZkGroupStore:
    zk_client.__class__ = CountingZkClient
    zk_client.multis = []  # type: ignore[attr-defined]
    return ZkGroupStore(zk_client)


def test_commits_write_kafkas_legacy_layout_in_one_multi_op(store: ZkGroupStore,
                                                            zk: KazooClient) -> None:
    multis: list[int] = store.zk_client.multis  # type: ignore[attr-defined]
    tps = [TopicPartition("t", p) for p in range(3)] + [TopicPartition("u", 0)]
    first = {tp: OffsetAndMetadata(10 + i, f"m{i}", 4, 1000) for i, tp in enumerate(tps)}
    run(store.commit_offsets("g", first))
    assert zk.get("/consumers/g/offsets/t/0")[0] == b"10"
    assert zk.get("/consumers/g/offsets/u/0")[0] == b"13"
    assert sorted(zk.get_children("/consumers/g/offsets/t")) == ["0", "1", "2"]
    metadata = zk.get("/consumers/g/offsets/t/1/metadata")[0]
    assert_valid(ConsumerOffsetMetadataZNode, metadata)
    assert json.loads(metadata) == {"version": 1, "metadata": "m1", "leader_epoch": 4,
                                    "commit_timestamp": 1000}
    # The first commit found nothing: one attempt, then one multi-op creating everything.
    assert len(multis) == 2
    multis.clear()
    second = {tp: OffsetAndMetadata(20, "", -1, 2000, 9000) for tp in tps}
    run(store.commit_offsets("g", second))
    assert multis == [8]  # steady state: one multi-op setting offset + metadata per partition
    assert zk.get("/consumers/g/offsets/t/2")[0] == b"20"
    assert run(store.fetch_offsets("g", None)) == second
    assert run(store.fetch_offsets("g", [TopicPartition("t", 1), TopicPartition("x", 0)])) == {
        TopicPartition("t", 1): second[TopicPartition("t", 1)]}
    # A partition new to an existing group: the missing znodes are created in one multi-op.
    multis.clear()
    run(store.commit_offsets("g", {TopicPartition("t", 3): OffsetAndMetadata(1),
                                   TopicPartition("t", 0): OffsetAndMetadata(21)}))
    assert len(multis) == 2 and zk.get("/consumers/g/offsets/t/3")[0] == b"1"
    assert run(store.groups_with_offsets()) == ["g"]


def test_offsets_written_by_other_tools_read_without_metadata(store: ZkGroupStore,
                                                              zk: KazooClient) -> None:
    zk.create("/consumers/legacy/offsets/t/0", b"77", makepath=True)
    found = run(store.fetch_offsets("legacy", None))
    value = found[TopicPartition("t", 0)]
    assert value.offset == 77 and value.metadata == "" and value.leader_epoch == -1
    assert value.commit_timestamp_ms > 0  # the znode's mtime
    run(store.commit_offsets("legacy", {TopicPartition("t", 0): OffsetAndMetadata(78, "x")}))
    assert zk.get("/consumers/legacy/offsets/t/0")[0] == b"78"
    assert run(store.fetch_offsets("legacy", None))[TopicPartition("t", 0)].metadata == "x"


def test_group_ids_that_are_not_znode_names(store: ZkGroupStore, zk: KazooClient) -> None:
    odd = ["a/b", "..", "", "50%", "tab\there", "emoji😀"]
    for group_id in odd:
        run(store.commit_offsets(group_id, {TopicPartition("t", 0): OffsetAndMetadata(5)}))
    assert sorted(zk.get_children("/consumers")) == sorted(
        ["a%2Fb", "%2E%2E", "%", "50%25", "tab%09here", "emoji%F0%9F%98%80"])
    assert sorted(run(store.groups_with_offsets())) == sorted(odd)
    for group_id in odd:
        assert run(store.fetch_offsets(group_id, None)) == {
            TopicPartition("t", 0): OffsetAndMetadata(5)}
    run(store.delete_group("a/b"))
    assert not zk.exists("/consumers/a%2Fb") and zk.exists("/consumers/%2E%2E")


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_znode_name_encoding_round_trips_and_is_legal(name: str) -> None:
    encoded = encode_znode_name(name)
    assert decode_znode_name(encoded) == name
    assert encoded not in ("", ".", "..") and "/" not in encoded
    assert all(not (c <= "\x1f" or "\x7f" <= c <= "\x9f" or "\ud800" <= c <= "\uf8ff"
                    or c >= "\ufff0") for c in encoded)


def test_delete_offsets(store: ZkGroupStore, zk: KazooClient) -> None:
    t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
    run(store.commit_offsets("g", {t0: OffsetAndMetadata(1), t1: OffsetAndMetadata(2)}))
    run(store.delete_offsets("g", [t0, TopicPartition("nope", 0)]))
    assert not zk.exists("/consumers/g/offsets/t/0")
    assert list(run(store.fetch_offsets("g", None))) == [t1]


def test_membership_mirror(store: ZkGroupStore, zk: KazooClient,
                           zk_client: KafkaZkClient) -> None:
    t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
    store.update_mirror("g", MembershipMirror({"m-1": ("t",), "c/2": ("t", "u")},
                                              {t0: "m-1", t1: "c/2"}))
    store.update_mirror("g", MembershipMirror({"m-1": ("t",)}, {t0: "m-1", t1: "m-1"}))
    run_until(lambda: zk.exists("/consumers/g/owners/t/1") is not None
              and zk.get("/consumers/g/owners/t/1")[0] == b"m-1"
              and zk.exists("/consumers/g/ids/c%2F2") is None)
    registration = json.loads(zk.get("/consumers/g/ids/m-1")[0])
    assert registration["subscription"] == {"t": 1} and registration["pattern"] == "static"
    stat = zk.exists("/consumers/g/ids/m-1")
    assert stat is not None and stat.ephemeralOwner == zk_client.session_id
    store.update_mirror("g", None)
    run_until(lambda: not zk.get_children("/consumers/g/ids")
              and not zk.get_children("/consumers/g/owners/t"))


def test_mirror_is_written_again_after_a_session_expiry(store: ZkGroupStore, zk: KazooClient,
                                                        zk_client: KafkaZkClient) -> None:
    store.update_mirror("g", MembershipMirror({"m-1": ("t",)}, {TopicPartition("t", 0): "m-1"}))
    run_until(lambda: zk.exists("/consumers/g/owners/t/0") is not None)
    old_session = zk_client.session_id
    expire_session(zk_client.kazoo_client)
    # The new session writes the ephemeral znodes again.
    run_until(lambda: zk_client.session_id != old_session
              and (stat := zk.exists("/consumers/g/owners/t/0")) is not None
              and stat.ephemeralOwner == zk_client.session_id
              and zk.exists("/consumers/g/ids/m-1") is not None, timeout=30)
    store.close()
