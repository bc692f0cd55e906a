"""ControlledShutdown (key 7), versions 0-3.

v0 is sent with request header v0 (no client id); api.py picks that header.
"""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(7, "ControlledShutdownRequest", valid="0-3", flexible="3+", fields=[
    field("broker_id", "int32"),
    field("broker_epoch", "int64", "2+", default=-1),
])

RESPONSE = response(7, "ControlledShutdownResponse", valid="0-3", flexible="3+", fields=[
    field("error_code", "int16"),
    field("remaining_partitions", "[]RemainingPartition", fields=[
        field("topic_name", "string"),
        field("partition_index", "int32"),
    ]),
])
