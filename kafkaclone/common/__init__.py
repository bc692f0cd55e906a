"""The vocabulary floor (Kafka's ``org.apache.kafka.common``): what every other package may
use and which imports no other kafkaclone package.

- ``errors``: Kafka 2.8's error table as exception classes
- ``topic_partition``: TopicPartition
- ``topic``: topic-name rules and the internal topics
- ``clock``: the Scheduler protocol (a reactor or ``task.Clock``) and ``now_ms``
- ``jvm``: Java's String.hashCode and Kafka's Utils.abs, for placement rules
- ``properties``: the Java properties-file parser
- ``config_def``: config tables (ConfigDef, ConfigKey, validators)
- ``endpoint``: listener endpoints (EndPoint, SecurityProtocol, listener-list parsing)
"""
