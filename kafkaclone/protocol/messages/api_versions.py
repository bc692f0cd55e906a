"""ApiVersions (key 18), versions 0-3."""

from kafkaclone.protocol.schema import field, request, response

REQUEST = request(18, "ApiVersionsRequest", valid="0-3", flexible="3+", fields=[
    field("client_software_name", "string", "3+"),
    field("client_software_version", "string", "3+"),
])

RESPONSE = response(18, "ApiVersionsResponse", valid="0-3", flexible="3+", fields=[
    field("error_code", "int16"),
    field("api_keys", "[]ApiVersion", fields=[
        field("api_key", "int16"),
        field("min_version", "int16"),
        field("max_version", "int16"),
    ]),
    field("throttle_time_ms", "int32", "1+"),
    field("supported_features", "[]SupportedFeatureKey", "3+", tag=0, fields=[
        field("name", "string", "3+"),
        field("min_version", "int16", "3+"),
        field("max_version", "int16", "3+"),
    ]),
    field("finalized_features_epoch", "int64", "3+", tag=1, default=-1),
    field("finalized_features", "[]FinalizedFeatureKey", "3+", tag=2, fields=[
        field("name", "string", "3+"),
        field("max_version_level", "int16", "3+"),
        field("min_version_level", "int16", "3+"),
    ]),
])
