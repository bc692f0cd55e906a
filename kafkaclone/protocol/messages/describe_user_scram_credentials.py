"""DescribeUserScramCredentials (key 50), version 0 (Kafka 2.8's
DescribeUserScramCredentialsRequest.json / Response.json, KIP-554)."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(50, "DescribeUserScramCredentialsRequest", valid="0", flexible="0+", fields=[
    field("users", "[]UserName", nullable="0+", about="The users to describe, or null for all.",
          fields=[field("name", "string")]),
])

RESPONSE = response(50, "DescribeUserScramCredentialsResponse", valid="0", flexible="0+",
                    fields=[
    field("throttle_time_ms", "int32"),
    field("error_code", "int16"),
    field("error_message", "string", nullable="0+"),
    field("results", "[]DescribeUserScramCredentialsResult", fields=[
        field("user", "string"),
        field("error_code", "int16"),
        field("error_message", "string", nullable="0+"),
        field("credential_infos", "[]CredentialInfo", fields=[
            field("mechanism", "int8"),
            field("iterations", "int32"),
        ]),
    ]),
])
