"""Consumer groups: Kafka 2.8's classic group protocol, group metadata in __consumer_offsets
and committed offsets in ZooKeeper.

- ``metadata``: GroupMetadata, MemberMetadata and the group state machine (legal
  transitions as data);
- ``coordinator``: GroupCoordinator (placement by ``__consumer_offsets`` partition leadership,
  join/sync/heartbeat/leave, describe/list/delete, offsets and their expiry, timers on the
  reactor clock);
- ``metadata_log``: Kafka's group metadata records (GroupMetadataKey/Value) and the
  GroupMetadataLog seam through which the coordinator stores groups in, and loads them from,
  its ``__consumer_offsets`` partitions;
- ``store``: ZkGroupStore, the offsets under ``/consumers/<g>/offsets/<t>/<p>`` and the
  membership mirror under ``/consumers/<g>/ids`` and ``/consumers/<g>/owners``.

The API handlers are in ``kafkaclone.server.handlers`` (find_coordinator, join_group, ...).
"""
