"""A partition as this broker hosts it (Kafka's kafka.cluster): ``partition`` holds
Partition (leader / follower, ISR expand and shrink, high watermark) and Replica (a remote
follower's fetch state). A broker's listener endpoints are on the common floor
(``kafkaclone.common.endpoint``); its registration is ``kafkaclone.zk.znodes.BrokerInfo``."""
