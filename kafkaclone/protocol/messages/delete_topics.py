"""DeleteTopics (key 20), versions 0-6 (Kafka 2.8)."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(20, "DeleteTopicsRequest", valid="0-6", flexible="4+", fields=[
    field("topics", "[]DeleteTopicState", "6+", fields=[
        field("name", "string", "6+", nullable="6+", default=None),
        field("topic_id", "uuid", "6+"),
    ]),
    field("topic_names", "[]string", "0-5"),
    field("timeout_ms", "int32"),
])

RESPONSE = response(20, "DeleteTopicsResponse", valid="0-6", flexible="4+", fields=[
    field("throttle_time_ms", "int32", "1+"),
    field("responses", "[]DeletableTopicResult", fields=[
        field("name", "string", nullable="6+"),
        field("topic_id", "uuid", "6+"),
        field("error_code", "int16"),
        field("error_message", "string", "5+", nullable="5+", default=None),
    ]),
])
