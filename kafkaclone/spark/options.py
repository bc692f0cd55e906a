"""The options of the "kafkaclone" Spark source and sink: Spark's Kafka connector options,
parsed and checked on the driver before any task runs.

Reader options (https://spark.apache.org/docs/latest/structured-streaming-kafka-integration.html):

- exactly one of ``assign`` (JSON ``{"topicA": [0, 1]}``), ``subscribe`` (comma-separated
  topics), ``subscribePattern`` (a regular expression, matched against the whole name);
- ``kafka.bootstrap.servers`` (required) and any other ``kafka.*`` option
  (``kafka.security.protocol``, ``kafka.sasl.*``, ``kafka.ssl.*`` included), handed to the
  client without the prefix; the options Spark refuses (``kafka.group.id`` aside, the
  consumer settings the source manages itself) are refused here too;
- ``startingOffsets``: ``earliest``, ``latest`` (streaming only) or JSON
  ``{"topic": {"0": 23, "1": -2}}`` (-2 earliest, -1 latest); default ``latest`` for
  streaming, ``earliest`` for batch;
- ``endingOffsets`` (batch only): ``latest`` or JSON (-1 latest; -2 is refused);
- ``startingTimestamp`` / ``startingOffsetsByTimestamp`` (JSON ``{"topic": {"0": ms}}``),
  taking precedence over ``startingOffsets``, with ``startingOffsetsByTimestampStrategy``
  ``error`` (default: no offset for the timestamp is an error) or ``latest``; likewise
  ``endingTimestamp`` / ``endingOffsetsByTimestamp`` for batch queries;
- ``failOnDataLoss`` (default true), ``includeHeaders`` (default false), ``minPartitions``,
  ``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger``, ``maxTriggerDelay`` (streaming),
  ``kafkaConsumer.pollTimeoutMs`` (default 120000), ``fetchOffset.numRetries`` (default 3),
  ``fetchOffset.retryIntervalMs`` (default 10), ``groupIdPrefix``;
- ``commitToGroup`` (kafkaclone's own, streaming): a consumer group the query commits its
  progress to after each micro-batch, so ``kafka-consumer-groups.sh`` shows its lag.

Writer options: ``kafka.bootstrap.servers`` and any ``kafka.*`` producer setting, ``topic``
(overrides the ``topic`` column), ``includeHeaders``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

EARLIEST: Final = -2
LATEST: Final = -1

TopicPartition = tuple[str, int]


class KafkaCloneOptionError(ValueError):
    """An option of the "kafkaclone" source or sink is missing, malformed or refused."""


@dataclass(frozen=True)
class OffsetSpec:
    """Where a range starts or ends: ``earliest`` / ``latest`` for every partition, per
    partition offsets (-2 / -1 allowed), or timestamps (one for all, or per partition)."""

    kind: str  # "earliest" | "latest" | "offsets" | "timestamp" | "timestamps"
    offsets: dict[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None
    strategy: str = "error"  # for timestamps: "error" | "latest"


@dataclass(frozen=True)
class Subscription:
    kind: str  # "assign" | "subscribe" | "subscribePattern"
    topics: tuple[str, ...] = ()
    partitions: tuple[TopicPartition, ...] = ()
    pattern: str | None = None

    def matches(self, topic: str) -> bool:
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribePattern":
            assert self.pattern is not None
            return re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _p in self.partitions)


@dataclass(frozen=True)
class ReaderOptions:
    subscription: Subscription
    kafka_params: dict[str, str]
    starting: OffsetSpec
    ending: OffsetSpec
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int | None = None
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    poll_timeout_ms: int = 120_000
    fetch_offset_num_retries: int = 3
    fetch_offset_retry_interval_ms: int = 10
    group_id_prefix: str = "spark-kafka-source"
    commit_to_group: str | None = None

    def consumer_config(self) -> dict[str, str]:
        """The client configuration: the ``kafka.*`` options without the prefix."""
        conf = dict(self.kafka_params)
        conf.setdefault("client.id", "kafkaclone-spark")
        return conf


@dataclass(frozen=True)
class WriterOptions:
    kafka_params: dict[str, str]
    topic: str | None = None
    include_headers: bool = False

    def producer_config(self) -> dict[str, str]:
        conf = dict(self.kafka_params)
        conf.setdefault("client.id", "kafkaclone-spark-writer")
        return conf


# Spark's KafkaSourceProvider refuses these consumer settings: the source manages them.
_REFUSED_CONSUMER_PARAMS: Final = {
    "auto.offset.reset": "Use startingOffsets / endingOffsets instead of kafka.auto.offset.reset",
    "key.deserializer": "Keys are always read as bytes: cast them in a query",
    "value.deserializer": "Values are always read as bytes: cast them in a query",
    "enable.auto.commit": "The source does not commit offsets to Kafka's group by auto commit",
    "interceptor.classes": "Kafka interceptors are not supported",
}
_REFUSED_PRODUCER_PARAMS: Final = {
    "key.serializer": "Keys are written as bytes: serialize them in the query (binary/string)",
    "value.serializer": "Values are written as bytes: serialize them in the query",
}

_DURATION: Final = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$")
_DURATION_MS: Final = {None: 1, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
                       "d": 86_400_000}


def _lower_keys(options: Mapping[str, str]) -> dict[str, str]:
    return {key.lower(): str(value) for key, value in options.items()}


def _kafka_params(options: dict[str, str], refused: Mapping[str, str]) -> dict[str, str]:
    params: dict[str, str] = {}
    for key, value in options.items():
        if key.startswith("kafka."):
            name = key[len("kafka."):]
            if name in refused:
                raise KafkaCloneOptionError(
                    f"Kafka option '{name}' is not supported: {refused[name]}."
                )
            params[name] = value
    if not params.get("bootstrap.servers"):
        raise KafkaCloneOptionError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka "
            "consumer and producer (e.g. host1:9092,host2:9092)."
        )
    return params


def _bool(options: dict[str, str], name: str, default: bool) -> bool:
    value = options.get(name.lower())
    if value is None:
        return default
    if value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise KafkaCloneOptionError(f"Option '{name}' must be true or false, not {value!r}.")


def _positive_int(options: dict[str, str], name: str, *, minimum: int = 1) -> int | None:
    value = options.get(name.lower())
    if value is None:
        return None
    try:
        number = int(value.strip())
    except ValueError:
        raise KafkaCloneOptionError(f"Option '{name}' must be an integer, not {value!r}.") from None
    if number < minimum:
        raise KafkaCloneOptionError(f"Option '{name}' must be at least {minimum}, not {number}.")
    return number


def _duration_ms(options: dict[str, str], name: str, default: int) -> int:
    value = options.get(name.lower())
    if value is None:
        return default
    match = _DURATION.match(value)
    if match is None:
        raise KafkaCloneOptionError(
            f"Option '{name}' must be a duration such as 15m, 30s or 500ms, not {value!r}."
        )
    return int(match.group(1)) * _DURATION_MS[match.group(2)]


def _json(name: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise KafkaCloneOptionError(
            f"Option '{name}' is not valid JSON ({exc.msg} at character {exc.pos}): {text!r}. "
            'Expected e.g. {"topicA": {"0": 23, "1": -1}, "topicB": {"0": -2}}.'
        ) from None


def _partition_map(name: str, text: str) -> dict[TopicPartition, int]:
    """``{"topic": {"partition": number}}`` -> ``{(topic, partition): number}``."""
    parsed = _json(name, text)
    if not isinstance(parsed, dict) or not parsed:
        raise KafkaCloneOptionError(
            f"Option '{name}' must be a non-empty JSON object of topics, got {text!r}."
        )
    out: dict[TopicPartition, int] = {}
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict):
            raise KafkaCloneOptionError(
                f"Option '{name}': topic {topic!r} must map partitions to numbers, "
                f"got {partitions!r}."
            )
        for partition, number in partitions.items():
            try:
                partition_id = int(partition)
            except ValueError:
                raise KafkaCloneOptionError(
                    f"Option '{name}': partition {partition!r} of topic {topic!r} is not an "
                    "integer."
                ) from None
            if isinstance(number, bool) or not isinstance(number, int):
                raise KafkaCloneOptionError(
                    f"Option '{name}': the value for {topic}-{partition} must be an integer, "
                    f"got {number!r}."
                )
            out[(topic, partition_id)] = number
    return out


def _subscription(options: dict[str, str]) -> Subscription:
    given = [name for name in ("assign", "subscribe", "subscribepattern") if name in options]
    if len(given) != 1:
        detail = "none was given" if not given else f"got {', '.join(given)}"
        raise KafkaCloneOptionError(
            "Exactly one of the options 'assign', 'subscribe' or 'subscribePattern' must be "
            f"specified for the kafkaclone source ({detail})."
        )
    kind = given[0]
    value = options[kind]
    if kind == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise KafkaCloneOptionError(
                f"Option 'subscribe' needs a comma-separated list of topics, got {value!r}."
            )
        return Subscription("subscribe", topics=topics)
    if kind == "subscribepattern":
        if not value.strip():
            raise KafkaCloneOptionError("Option 'subscribePattern' is empty.")
        try:
            re.compile(value)
        except re.error as exc:
            raise KafkaCloneOptionError(
                f"Option 'subscribePattern' is not a valid pattern ({exc}): {value!r}."
            ) from None
        return Subscription("subscribePattern", pattern=value)
    parsed = _json("assign", value)
    if not isinstance(parsed, dict) or not parsed:
        raise KafkaCloneOptionError(
            'Option \'assign\' must be a JSON object like {"topicA": [0, 1]}, got '
            f"{value!r}."
        )
    partitions: list[TopicPartition] = []
    for topic, ids in parsed.items():
        if not isinstance(ids, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids
        ):
            raise KafkaCloneOptionError(
                f"Option 'assign': topic {topic!r} must map to a list of partition numbers, "
                f"got {ids!r}."
            )
        partitions.extend((topic, i) for i in ids)
    return Subscription("assign", partitions=tuple(partitions))


def _offset_spec(
    options: dict[str, str], prefix: str, default: str, *, streaming: bool
) -> OffsetSpec:
    """``prefix`` is "starting" or "ending"."""
    strategy = options.get(f"{prefix}offsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise KafkaCloneOptionError(
            f"Option '{prefix}OffsetsByTimestampStrategy' must be 'error' or 'latest', "
            f"not {strategy!r}."
        )
    single = options.get(f"{prefix}timestamp")
    if single is not None:
        try:
            timestamp = int(single.strip())
        except ValueError:
            raise KafkaCloneOptionError(
                f"Option '{prefix}Timestamp' must be a timestamp in milliseconds, "
                f"not {single!r}."
            ) from None
        if timestamp < 0:
            raise KafkaCloneOptionError(f"Option '{prefix}Timestamp' must not be negative.")
        return OffsetSpec("timestamp", timestamp=timestamp, strategy=strategy)
    by_timestamp = options.get(f"{prefix}offsetsbytimestamp")
    if by_timestamp is not None:
        name = f"{prefix}OffsetsByTimestamp"
        stamps = _partition_map(name, by_timestamp)
        if any(ts < 0 for ts in stamps.values()):
            raise KafkaCloneOptionError(f"Option '{name}': timestamps must not be negative.")
        return OffsetSpec("timestamps", offsets=stamps, strategy=strategy)
    name = f"{prefix}Offsets"
    text = options.get(f"{prefix}offsets", default).strip()
    if text.lower() == "earliest":
        if prefix == "ending":
            raise KafkaCloneOptionError(
                "Option 'endingOffsets' cannot be 'earliest': the query would read nothing."
            )
        return OffsetSpec("earliest")
    if text.lower() == "latest":
        if prefix == "starting" and not streaming:
            raise KafkaCloneOptionError(
                "Option 'startingOffsets' cannot be 'latest' for a batch query: the query "
                "would read nothing."
            )
        return OffsetSpec("latest")
    offsets = _partition_map(name, text)
    for (topic, partition), offset in offsets.items():
        if offset < EARLIEST:
            raise KafkaCloneOptionError(
                f"Option '{name}': offset {offset} for {topic}-{partition} is not an offset, "
                "-2 (earliest) or -1 (latest)."
            )
        if prefix == "ending" and offset == EARLIEST:
            raise KafkaCloneOptionError(
                f"Option 'endingOffsets': -2 (earliest) is not allowed ({topic}-{partition})."
            )
        if prefix == "starting" and not streaming and offset == LATEST:
            raise KafkaCloneOptionError(
                f"Option 'startingOffsets': -1 (latest) is not allowed for a batch query "
                f"({topic}-{partition})."
            )
    return OffsetSpec("offsets", offsets=offsets)


def parse_reader_options(raw: Mapping[str, str], *, streaming: bool) -> ReaderOptions:
    """Check every option for a batch (``streaming=False``) or streaming query;
    KafkaCloneOptionError names the bad option and what it expects."""
    options = _lower_keys(raw)
    subscription = _subscription(options)
    kafka_params = _kafka_params(options, _REFUSED_CONSUMER_PARAMS)
    starting = _offset_spec(
        options, "starting", "latest" if streaming else "earliest", streaming=streaming
    )
    if streaming:
        for name in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"):
            if name in options:
                raise KafkaCloneOptionError(
                    f"Option '{name}' is for batch queries only; a streaming query keeps "
                    "reading new data."
                )
        ending = OffsetSpec("latest")
    else:
        for name in ("maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay"):
            if name in options:
                raise KafkaCloneOptionError(f"Option '{name}' is for streaming queries only.")
        ending = _offset_spec(options, "ending", "latest", streaming=False)
    max_per_trigger = _positive_int(options, "maxOffsetsPerTrigger")
    min_per_trigger = _positive_int(options, "minOffsetsPerTrigger")
    if max_per_trigger is not None and min_per_trigger is not None and (
        min_per_trigger > max_per_trigger
    ):
        raise KafkaCloneOptionError(
            "Option 'minOffsetsPerTrigger' must not exceed 'maxOffsetsPerTrigger'."
        )
    commit_group = options.get("committogroup")
    return ReaderOptions(
        subscription=subscription,
        kafka_params=kafka_params,
        starting=starting,
        ending=ending,
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        include_headers=_bool(options, "includeHeaders", False),
        min_partitions=_positive_int(options, "minPartitions"),
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=_duration_ms(options, "maxTriggerDelay", 15 * 60 * 1000),
        poll_timeout_ms=_positive_int(options, "kafkaConsumer.pollTimeoutMs") or 120_000,
        fetch_offset_num_retries=(
            3
            if options.get("fetchoffset.numretries") is None
            else int(_positive_int(options, "fetchOffset.numRetries", minimum=0) or 0)
        ),
        fetch_offset_retry_interval_ms=(
            _positive_int(options, "fetchOffset.retryIntervalMs", minimum=0) or 10
        ),
        group_id_prefix=options.get("groupidprefix", "spark-kafka-source"),
        commit_to_group=commit_group.strip() if commit_group and commit_group.strip() else None,
    )


def parse_writer_options(raw: Mapping[str, str]) -> WriterOptions:
    options = _lower_keys(raw)
    topic = options.get("topic")
    if topic is not None and not topic.strip():
        raise KafkaCloneOptionError("Option 'topic' is empty.")
    return WriterOptions(
        kafka_params=_kafka_params(options, _REFUSED_PRODUCER_PARAMS),
        topic=topic.strip() if topic else None,
        include_headers=_bool(options, "includeHeaders", False),
    )
