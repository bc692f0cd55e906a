"""The checked-in typed message classes: current, and the very classes the codecs use."""

from __future__ import annotations

import dataclasses

import pytest

from kafkaclone.protocol import message_types
from kafkaclone.protocol.api import APIS, MESSAGES
from kafkaclone.protocol.schema import compile_message, field, request
from kafkaclone.tools.protocol_types import MODULE, declared_specs, main, render_module


def test_checked_in_module_is_current() -> None:
    # Fails after a change to kafkaclone/protocol/messages: run
    # python -m kafkaclone.tools.protocol_types --write and commit the result.
    assert MODULE.read_text() == render_module()
    assert main(["--check"]) == 0


def test_every_declared_message_has_its_class() -> None:
    assert sorted(message_types.__all__) == sorted(spec.name for spec in declared_specs())


def test_compiled_messages_decode_into_the_typed_classes() -> None:
    for name, message in MESSAGES.items():
        assert message.cls is vars(message_types)[name]
    for target in APIS.values():
        assert target.request.cls is vars(message_types)[target.request.name]
        for struct_name, cls in target.response.structs.items():
            assert cls.__qualname__.split(".")[-1] == struct_name
            assert cls.__module__ == message_types.__name__


def test_a_decoded_message_is_an_instance_of_its_typed_class() -> None:
    sent = message_types.HeartbeatResponse(throttle_time_ms=5, error_code=27)
    heartbeat = APIS[12].response
    decoded = heartbeat.decode_exact(heartbeat.encode(sent, 4), 4)
    assert type(decoded) is message_types.HeartbeatResponse
    assert decoded == sent


def test_fields_have_every_version_and_their_defaults() -> None:
    produce = message_types.ProduceRequest()
    assert produce.transactional_id is None
    assert produce.topic_data == []
    partition = message_types.ProduceResponse.TopicProduceResponse.PartitionProduceResponse()
    assert (partition.log_append_time_ms, partition.error_message) == (-1, None)
    names = [f.name for f in dataclasses.fields(message_types.HeartbeatRequest)]
    assert names == ["group_id", "generation_id", "member_id", "group_instance_id",
                     "unknown_tagged_fields"]


def test_a_class_that_does_not_match_its_declaration_is_refused() -> None:
    changed = request(12, "HeartbeatRequest", valid="0-4", flexible="4+", fields=[
        field("group_id", "string"),
        field("generation_id", "int32"),
    ])
    with pytest.raises(ValueError, match="protocol_types --write"):
        compile_message(changed)
