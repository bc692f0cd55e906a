"""KafkaController: the controller election, its event queue, the partition and replica
state machines, leader election and the channel to the brokers (LeaderAndIsr,
UpdateMetadata, StopReplica)."""
