"""EndTxn (key 26), versions 0-3 (Kafka 2.8's EndTxnRequest.json / EndTxnResponse.json)."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(26, "EndTxnRequest", valid="0-3", flexible="3+", fields=[
    field("transactional_id", "string"),
    field("producer_id", "int64"),
    field("producer_epoch", "int16"),
    field("committed", "bool", about="True to commit the transaction, false to abort it."),
])

RESPONSE = response(26, "EndTxnResponse", valid="0-3", flexible="3+", fields=[
    field("throttle_time_ms", "int32"),
    field("error_code", "int16"),
])
