"""AlterUserScramCredentials (key 51), v0: upsert (from the client's salted password) or
delete users' SCRAM credentials in ``/config/users`` and notify every broker (Kafka 2.8's
ZkAdminManager.alterUserScramCredentials; KIP-554)."""

from __future__ import annotations

from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.protocol.message_types import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
)
from kafkaclone.server.handlers.registry import RequestContext, handler
from kafkaclone.server.security import scram_admin

_Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult


@handler(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, versions=(0, 0))
async def handle_alter_user_scram_credentials(
        ctx: RequestContext, request: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    results = await scram_admin.alter(
        ctx.broker.zk_client,
        [(deletion.name, deletion.mechanism) for deletion in request.deletions],
        [scram_admin.Upsertion(u.name, u.mechanism, u.iterations, bytes(u.salt),
                               bytes(u.salted_password)) for u in request.upsertions])
    return AlterUserScramCredentialsResponse(
        throttle_time_ms=0,
        results=[_Result(user=r.user, error_code=r.error_code, error_message=r.error_message)
                 for r in results])
