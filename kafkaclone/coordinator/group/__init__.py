"""Consumer groups: Kafka 2.8's classic group protocol and committed offsets in ZooKeeper.

- ``metadata``: GroupMetadata, MemberMetadata and the group state machine (legal
  transitions as data);
- ``coordinator``: GroupCoordinator (placement by ``__consumer_offsets`` partition leadership,
  join/sync/heartbeat/leave, describe/list/delete, offsets and their expiry, timers on the
  reactor clock);
- ``store``: ZkGroupStore, the offsets under ``/consumers/<g>/offsets/<t>/<p>`` and the
  membership mirror under ``/consumers/<g>/ids`` and ``/consumers/<g>/owners``.

The API handlers are in ``kafkaclone.server.handlers`` (find_coordinator, join_group, ...).
"""
