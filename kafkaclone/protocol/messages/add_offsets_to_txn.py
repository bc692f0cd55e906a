"""AddOffsetsToTxn (key 25), versions 0-3 (Kafka 2.8's AddOffsetsToTxnRequest.json /
AddOffsetsToTxnResponse.json)."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(25, "AddOffsetsToTxnRequest", valid="0-3", flexible="3+", fields=[
    field("transactional_id", "string"),
    field("producer_id", "int64"),
    field("producer_epoch", "int16"),
    field("group_id", "string", about="The group whose offsets the transaction will commit."),
])

RESPONSE = response(25, "AddOffsetsToTxnResponse", valid="0-3", flexible="3+", fields=[
    field("throttle_time_ms", "int32"),
    field("error_code", "int16"),
])
