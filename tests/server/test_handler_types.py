"""Every handler is typed against its own API's request and response classes."""

from __future__ import annotations

import typing

from kafkaclone.protocol.api import APIS
from kafkaclone.server.handlers.registry import load_handlers


def test_each_handler_takes_its_request_class_and_returns_its_response_class() -> None:
    handlers = load_handlers()
    assert handlers
    for key, registered in handlers.items():
        hints = typing.get_type_hints(registered.fn)
        declared = APIS[key]
        assert hints["request"] is declared.request.cls, key.name
        returned = hints["return"]
        # Produce with acks=0 answers nothing: ProduceResponse | None.
        assert returned is declared.response.cls or (
            declared.response.cls in typing.get_args(returned)), key.name
