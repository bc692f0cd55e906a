"""Kafka's ZooKeeper layer (Kafka's kafka.zookeeper and kafka.zk), in layers:

- ``zookeeper_client``: ZooKeeperClient, one kazoo session made safe for the reactor
  (results and watch events handed to the reactor thread, requests retried across
  reconnects, watch and session handlers, multi-ops);
- ``client``: KafkaZkClient, Kafka's ZooKeeper operations in Kafka's vocabulary (broker
  registration, controller election and fencing, topics, partition states, ISR changes,
  configs, producer id blocks, committed offsets under ``/consumers``) over a ZooKeeperClient;
- ``znodes``: one class per znode (path, encode, decode), byte for byte Kafka's ZkData;
- ``admin``: AdminZkClient (topic creation and deletion, partitions, config changes);
- ``jvm_order``: the JVM map iteration orders Kafka's JSON payloads are written in;
- ``errors``: the layer's errors.
"""
