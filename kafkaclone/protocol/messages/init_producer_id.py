"""InitProducerId (key 22), versions 0-4 (Kafka 2.8's InitProducerIdRequest.json /
InitProducerIdResponse.json)."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(22, "InitProducerIdRequest", valid="0-4", flexible="2+", fields=[
    field("transactional_id", "string", nullable="0+",
          about="The transactional id, or null if the producer is not transactional."),
    field("transaction_timeout_ms", "int32"),
    field("producer_id", "int64", "3+", default=-1,
          about="The producer's current id, to resume after INVALID_PRODUCER_EPOCH (KIP-360)."),
    field("producer_epoch", "int16", "3+", default=-1),
])

RESPONSE = response(22, "InitProducerIdResponse", valid="0-4", flexible="2+", fields=[
    field("throttle_time_ms", "int32"),
    field("error_code", "int16"),
    field("producer_id", "int64", default=-1),
    field("producer_epoch", "int16"),
])
