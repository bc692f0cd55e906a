"""Listener endpoints (kafkaclone.common.endpoint): parsing ``NAME://host:port`` as Kafka
does, listener lists, the security protocol map, and Kafka's protocol ids."""

from __future__ import annotations

import pytest

from kafkaclone.common.endpoint import (
    EndPoint,
    SecurityProtocol,
    parse_listeners,
    parse_security_protocol_map,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PLAINTEXT://127.0.0.1:9092", EndPoint("PLAINTEXT", SecurityProtocol.PLAINTEXT,
                                                "127.0.0.1", 9092)),
        ("plaintext://:0", EndPoint("PLAINTEXT", SecurityProtocol.PLAINTEXT, None, 0)),
        ("SSL://[::1]:9093", EndPoint("SSL", SecurityProtocol.SSL, "::1", 9093)),
        ("SASL_SSL://my-host.example.com:9094",
         EndPoint("SASL_SSL", SecurityProtocol.SASL_SSL, "my-host.example.com", 9094)),
    ],
)
def test_endpoint_parse(text: str, expected: EndPoint) -> None:
    endpoint = EndPoint.parse(text)
    assert endpoint == expected
    assert EndPoint.parse(endpoint.connection_string) == endpoint


def test_endpoint_connection_strings() -> None:
    assert EndPoint.parse("SSL://[::1]:9093").connection_string == "SSL://[::1]:9093"
    assert str(EndPoint.parse("plaintext://:9092")) == "PLAINTEXT://:9092"


def test_parse_listeners_with_a_map() -> None:
    protocol_map = parse_security_protocol_map(" internal : plaintext , EXTERNAL:SASL_SSL ")
    assert protocol_map == {
        "INTERNAL": SecurityProtocol.PLAINTEXT, "EXTERNAL": SecurityProtocol.SASL_SSL
    }
    endpoints = parse_listeners("INTERNAL://:9092 , EXTERNAL://h:9093,", protocol_map)
    assert [e.security_protocol for e in endpoints] == [
        SecurityProtocol.PLAINTEXT, SecurityProtocol.SASL_SSL
    ]
    assert parse_listeners("") == []
    # Port 0 (ephemeral) may repeat; other ports only where distinct ports are not required.
    assert len(parse_listeners("PLAINTEXT://:0,SSL://:0")) == 2
    assert len(parse_listeners("PLAINTEXT://a:1,SSL://b:1", require_distinct_ports=False)) == 2


def test_security_protocol_ids_are_kafkas() -> None:
    assert [(p.name, p.value) for p in SecurityProtocol] == [
        ("PLAINTEXT", 0), ("SSL", 1), ("SASL_PLAINTEXT", 2), ("SASL_SSL", 3)
    ]
    assert SecurityProtocol.for_name("sasl_ssl") is SecurityProtocol.SASL_SSL


def test_the_security_protocol_map_names_each_listeners_protocol() -> None:
    protocol_map = {"CLIENT": SecurityProtocol.SSL}
    assert EndPoint.parse("client://:9092", protocol_map) == EndPoint(
        "CLIENT", SecurityProtocol.SSL, None, 9092
    )
    with pytest.raises(ValueError, match="no security protocol defined for listener CLIENT"):
        EndPoint.parse("CLIENT://h:9092")  # the default map names only the protocols
    with pytest.raises(ValueError, match="NAME://host:port"):
        EndPoint.parse("localhost:9092")
    with pytest.raises(ValueError, match="not in"):
        EndPoint.parse("PLAINTEXT://h:65536")
