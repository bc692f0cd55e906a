"""Delayed operations on the reactor clock: the purgatory, DelayedProduce (acks=-1 waits
for the high watermark), DelayedFetch (long polls woken by appends and high watermark moves)
and DelayedDeleteRecords (waits for every replica's log start offset); and the admin
requests that wait for the controller's UpdateMetadata: DelayedCreatePartitions
(CreateTopics, CreatePartitions), DelayedDeleteTopics and DelayedElectLeader."""
