"""Config tables of Kafka Connect: the worker's (``WorkerConfig`` with
``StandaloneConfig`` / ``DistributedConfig`` keys) and every connector's
(``ConnectorConfig``, ``SinkConnectorConfig``), with Kafka's names and defaults."""

from __future__ import annotations

from typing import Final

from kafkaclone.common.config_def import (
    AbstractConfig,
    ConfigDef,
    ConfigError,
    ConfigKey,
    ConfigType,
    Importance,
    at_least,
    between,
    each_one_of,
    one_of,
)
from kafkaclone.connect.signature import HMAC_DIGESTS

JSON_CONVERTER: Final = "org.apache.kafka.connect.json.JsonConverter"

WORKER_CONFIG: Final = ConfigDef([
    ConfigKey("bootstrap.servers", ConfigType.LIST, ("localhost:9092",), Importance.HIGH,
              "A list of host/port pairs to use for establishing the initial connection to "
              "the Kafka cluster."),
    ConfigKey("key.converter", ConfigType.STRING, JSON_CONVERTER, Importance.HIGH,
              "Converter class used to convert between Kafka Connect format and the "
              "serialized form that is written to Kafka."),
    ConfigKey("value.converter", ConfigType.STRING, JSON_CONVERTER, Importance.HIGH,
              "Converter class for values."),
    ConfigKey("offset.storage.file.filename", ConfigType.STRING, None, Importance.HIGH,
              "File to store offset data in (standalone mode)."),
    ConfigKey("offset.flush.interval.ms", ConfigType.LONG, 60000, Importance.LOW,
              "Interval at which to try committing offsets for tasks.", at_least(0)),
    ConfigKey("offset.flush.timeout.ms", ConfigType.LONG, 5000, Importance.LOW,
              "Maximum number of milliseconds to wait for records to flush.", at_least(0)),
    ConfigKey("listeners", ConfigType.LIST, None, Importance.LOW,
              "List of comma-separated URIs the REST API will listen on."),
    ConfigKey("rest.host.name", ConfigType.STRING, None, Importance.LOW,
              "Hostname for the REST API.", deprecated=True),
    ConfigKey("rest.port", ConfigType.INT, 8083, Importance.LOW,
              "Port for the REST API to listen on.", deprecated=True),
    ConfigKey("rest.advertised.host.name", ConfigType.STRING, None, Importance.LOW,
              "The hostname given out to other workers to connect to."),
    ConfigKey("plugin.path", ConfigType.LIST, None, Importance.LOW,
              "Kafka's plugin directories; kafkaclone finds plugins through entry points "
              "(group kafkaclone.connect.plugins) and ignores it."),
    ConfigKey("task.shutdown.graceful.timeout.ms", ConfigType.LONG, 5000, Importance.LOW,
              "Amount of time to wait for tasks to shutdown gracefully."),
    ConfigKey("group.id", ConfigType.STRING, None, Importance.HIGH,
              "A unique string that identifies the Connect cluster group (distributed)."),
    ConfigKey("config.storage.topic", ConfigType.STRING, None, Importance.HIGH,
              "The name of the Kafka topic where connector configurations are stored."),
    ConfigKey("offset.storage.topic", ConfigType.STRING, None, Importance.HIGH,
              "The name of the Kafka topic where connector offsets are stored."),
    ConfigKey("status.storage.topic", ConfigType.STRING, None, Importance.HIGH,
              "The name of the Kafka topic where connector and task status are stored."),
    ConfigKey("config.storage.replication.factor", ConfigType.SHORT, 3, Importance.LOW,
              "Replication factor used when creating the configuration storage topic."),
    ConfigKey("offset.storage.replication.factor", ConfigType.SHORT, 3, Importance.LOW,
              "Replication factor used when creating the offset storage topic."),
    ConfigKey("offset.storage.partitions", ConfigType.INT, 25, Importance.LOW,
              "The number of partitions used when creating the offset storage topic."),
    ConfigKey("status.storage.replication.factor", ConfigType.SHORT, 3, Importance.LOW,
              "Replication factor used when creating the status storage topic."),
    ConfigKey("status.storage.partitions", ConfigType.INT, 5, Importance.LOW,
              "The number of partitions used when creating the status storage topic."),
    ConfigKey("session.timeout.ms", ConfigType.INT, 10000, Importance.HIGH,
              "The timeout used to detect worker failures."),
    ConfigKey("heartbeat.interval.ms", ConfigType.INT, 3000, Importance.HIGH,
              "The expected time between heartbeats to the group coordinator."),
    ConfigKey("rebalance.timeout.ms", ConfigType.INT, 60000, Importance.HIGH,
              "The maximum allowed time for each worker to join the group once a rebalance "
              "has begun."),
    ConfigKey("connect.protocol", ConfigType.STRING, "sessioned", Importance.LOW,
              "Compatibility mode for Kafka Connect Protocol",
              one_of("eager", "compatible", "sessioned")),
    ConfigKey("scheduled.rebalance.max.delay.ms", ConfigType.INT, 300000, Importance.LOW,
              "The maximum delay that is scheduled in order to wait for the return of one or "
              "more departed workers before rebalancing and reassigning their connectors and "
              "tasks to the group. During this period the connectors and tasks of the "
              "departed workers remain unassigned", between(0, 2147483647)),
    ConfigKey("inter.worker.key.generation.algorithm", ConfigType.STRING, "HmacSHA256",
              Importance.LOW, "The algorithm to use for generating internal request keys",
              one_of(*HMAC_DIGESTS)),
    ConfigKey("inter.worker.key.size", ConfigType.INT, None, Importance.LOW,
              "The size of the key to use for signing internal requests, in bits. If null, "
              "the default key size for the key generation algorithm will be used.",
              at_least(8)),
    ConfigKey("inter.worker.key.ttl.ms", ConfigType.INT, 3600000, Importance.LOW,
              "The TTL of generated session keys used for internal request validation (in "
              "milliseconds)", between(0, 2147483647)),
    ConfigKey("inter.worker.signature.algorithm", ConfigType.STRING, "HmacSHA256",
              Importance.LOW, "The algorithm used to sign internal requests",
              one_of(*HMAC_DIGESTS)),
    ConfigKey("inter.worker.verification.algorithms", ConfigType.LIST, ("HmacSHA256",),
              Importance.LOW, "A list of permitted algorithms for verifying internal "
              "requests", each_one_of(*HMAC_DIGESTS)),
])


def check_distributed_config(config: AbstractConfig) -> None:
    """The checks across keys of Kafka's ``DistributedConfig``; ConfigError on the first
    problem."""
    verification = config.get_list("inter.worker.verification.algorithms")
    if not verification:
        raise ConfigError("inter.worker.verification.algorithms", "",
                          "At least one algorithm must be provided")
    signature = config.get_str("inter.worker.signature.algorithm")
    if signature not in verification:
        raise ConfigError("inter.worker.signature.algorithm", signature,
                          "Signature algorithm must be present in "
                          "inter.worker.verification.algorithms list")

ERRORS_GROUP: Final = "Error Handling"

CONNECTOR_CONFIG: Final = ConfigDef([
    ConfigKey("name", ConfigType.STRING, "", Importance.HIGH,
              "Globally unique name to use for this connector.", group="Common"),
    ConfigKey("connector.class", ConfigType.STRING, "", Importance.HIGH,
              "Name or alias of the class for this connector.", group="Common"),
    ConfigKey("tasks.max", ConfigType.INT, 1, Importance.HIGH,
              "Maximum number of tasks to use for this connector.", at_least(1),
              group="Common"),
    ConfigKey("key.converter", ConfigType.CLASS, None, Importance.LOW,
              "Converter class for keys (overrides the worker's).", group="Common"),
    ConfigKey("value.converter", ConfigType.CLASS, None, Importance.LOW,
              "Converter class for values (overrides the worker's).", group="Common"),
    ConfigKey("header.converter", ConfigType.CLASS, None, Importance.LOW,
              "HeaderConverter class (overrides the worker's).", group="Common"),
    ConfigKey("transforms", ConfigType.LIST, (), Importance.LOW,
              "Aliases for the transformations to be applied to records.",
              group="Transforms"),
    ConfigKey("errors.retry.timeout", ConfigType.LONG, 0, Importance.MEDIUM,
              "The maximum duration in milliseconds that a failed operation will be "
              "reattempted.", group=ERRORS_GROUP),
    ConfigKey("errors.retry.delay.max.ms", ConfigType.LONG, 60000, Importance.MEDIUM,
              "The maximum duration in milliseconds between consecutive retry attempts.",
              group=ERRORS_GROUP),
    ConfigKey("errors.tolerance", ConfigType.STRING, "none", Importance.MEDIUM,
              "Behavior for tolerating errors during connector operation. 'none' is the "
              "default value and signals that any error will result in an immediate "
              "connector task failure; 'all' changes the behavior to skip over problematic "
              "records.", one_of("none", "all"), group=ERRORS_GROUP),
    ConfigKey("errors.log.enable", ConfigType.BOOLEAN, False, Importance.MEDIUM,
              "If true, write each error and the details of the failed operation and "
              "problematic record to the Connect application log.", group=ERRORS_GROUP),
    ConfigKey("errors.log.include.messages", ConfigType.BOOLEAN, False, Importance.MEDIUM,
              "Whether to include in the log the Connect record that resulted in a failure.",
              group=ERRORS_GROUP),
])
"""``ConnectorConfig``: the keys every connector has."""

SINK_CONFIG: Final = ConfigDef([
    *CONNECTOR_CONFIG,
    ConfigKey("topics", ConfigType.LIST, (), Importance.HIGH,
              "List of topics to consume, separated by commas", group="Common"),
    ConfigKey("topics.regex", ConfigType.STRING, "", Importance.HIGH,
              "Regular expression giving topics to consume.", group="Common"),
    ConfigKey("errors.deadletterqueue.topic.name", ConfigType.STRING, "", Importance.MEDIUM,
              "The name of the topic to be used as the dead letter queue (DLQ) for messages "
              "that result in an error when processed by this sink connector.",
              group=ERRORS_GROUP),
    ConfigKey("errors.deadletterqueue.topic.replication.factor", ConfigType.SHORT, 3,
              Importance.MEDIUM, "Replication factor used to create the dead letter queue "
              "topic when it doesn't already exist.", group=ERRORS_GROUP),
    ConfigKey("errors.deadletterqueue.context.headers.enable", ConfigType.BOOLEAN, False,
              Importance.MEDIUM, "If true, add headers containing error context to the "
              "messages written to the dead letter queue.", group=ERRORS_GROUP),
])
"""``SinkConnectorConfig``."""
