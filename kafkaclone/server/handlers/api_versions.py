"""ApiVersions (key 18): what this broker serves, computed from the handler registry."""

from __future__ import annotations

import re
from typing import Final

from kafkaclone.common.errors import NONE, InvalidRequestError, UnsupportedVersionError
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import ApiVersionsRequest, ApiVersionsResponse
from kafkaclone.server.handlers.registry import RequestContext, handler, supported_versions

_SOFTWARE_NAME_OR_VERSION: Final = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def api_versions_response() -> ApiVersionsResponse:
    """The ApiVersions response body listing every served API and its version range."""
    entry = ApiVersionsResponse.ApiVersion
    return ApiVersionsResponse(
        error_code=NONE,
        api_keys=[entry(api_key=key, min_version=low, max_version=high)
                  for key, low, high in supported_versions()],
    )


def unsupported_version_response() -> ApiVersionsResponse:
    """KIP-511: a request at an ApiVersions version the broker does not know gets a v0
    answer with error 35 and ApiVersions' own range, so the client can retry with a version
    both sides know (Kafka 2.8's ApiVersionsRequest.getErrorResponse)."""
    entry = ApiVersionsResponse.ApiVersion
    served = [(key, low, high) for key, low, high in supported_versions()
              if key == ApiKey.API_VERSIONS]
    return ApiVersionsResponse(
        error_code=UnsupportedVersionError.code,
        api_keys=[entry(api_key=key, min_version=low, max_version=high)
                  for key, low, high in served],
    )


@handler(ApiKey.API_VERSIONS, versions=(0, 3))
async def handle_api_versions(
        ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    if ctx.api_version >= 3 and not (
        _SOFTWARE_NAME_OR_VERSION.fullmatch(request.client_software_name)
        and _SOFTWARE_NAME_OR_VERSION.fullmatch(request.client_software_version)
    ):
        # Kafka answers an invalid client software name or version with INVALID_REQUEST
        # and no API list.
        return ApiVersionsResponse(error_code=InvalidRequestError.code)
    return api_versions_response()
