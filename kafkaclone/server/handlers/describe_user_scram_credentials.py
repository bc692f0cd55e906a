"""DescribeUserScramCredentials (key 50), v0: each user's SCRAM mechanisms and iteration
counts, never the salt or keys (Kafka 2.8's KafkaApis / ZkAdminManager; KIP-554)."""

from __future__ import annotations

from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from kafkaclone.server.handlers.registry import RequestContext, handler
from kafkaclone.server.security import scram_admin

_Result = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
_Info = _Result.CredentialInfo


@handler(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, versions=(0, 0))
async def handle_describe_user_scram_credentials(
        ctx: RequestContext, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    users = None if request.users is None else [user.name for user in request.users]
    described = await scram_admin.describe(ctx.broker.zk_client, users or None)
    return DescribeUserScramCredentialsResponse(
        throttle_time_ms=0, error_code=0, error_message=None,
        results=[_Result(user=result.user, error_code=result.error_code,
                         error_message=result.error_message,
                         credential_infos=[_Info(mechanism=mechanism, iterations=iterations)
                                           for mechanism, iterations in infos])
                 for result, infos in described])
