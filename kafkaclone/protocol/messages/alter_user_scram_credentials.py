"""AlterUserScramCredentials (key 51), version 0 (Kafka 2.8's
AlterUserScramCredentialsRequest.json / Response.json, KIP-554). The client sends the
salted password, never the password."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(51, "AlterUserScramCredentialsRequest", valid="0", flexible="0+", fields=[
    field("deletions", "[]ScramCredentialDeletion", fields=[
        field("name", "string"),
        field("mechanism", "int8"),
    ]),
    field("upsertions", "[]ScramCredentialUpsertion", fields=[
        field("name", "string"),
        field("mechanism", "int8"),
        field("iterations", "int32"),
        field("salt", "bytes"),
        field("salted_password", "bytes"),
    ]),
])

RESPONSE = response(51, "AlterUserScramCredentialsResponse", valid="0", flexible="0+", fields=[
    field("throttle_time_ms", "int32"),
    field("results", "[]AlterUserScramCredentialsResult", fields=[
        field("user", "string"),
        field("error_code", "int16"),
        field("error_message", "string", nullable="0+"),
    ]),
])
