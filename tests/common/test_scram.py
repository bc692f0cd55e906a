"""SCRAM (RFC 5802/7677) against the RFC 7677 test vector, Kafka's stored credential format,
and Kafka's JAAS syntax."""

from __future__ import annotations

import base64

import pytest

from kafkaclone.common.jaas import parse_jaas_config, parse_single_login_module
from kafkaclone.common.scram import (
    ScramClientExchange,
    ScramCredential,
    ScramError,
    ScramServerExchange,
    make_credential,
)


def test_rfc7677_sha256_vector() -> None:
    """RFC 7677 section 3: user "user", password "pencil"."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = make_credential("SCRAM-SHA-256", "pencil", 4096, salt)
    server = ScramServerExchange("SCRAM-SHA-256")
    server.client_first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", {"user": credential})
    server._nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"  # the RFC's
    server._server_first = ("r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            "s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    final = server.client_final(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_exchange_and_credential_round_trip(mechanism: str) -> None:
    credential = make_credential(mechanism, "secret", 8192)
    stored = credential.to_config_value()
    assert stored.startswith("salt=") and stored.endswith(",iterations=8192")
    assert ScramCredential.from_config_value(stored) == credential
    client = ScramClientExchange(mechanism, "a,b=c", "secret")
    server = ScramServerExchange(mechanism)
    server_first = server.client_first(client.first(), {"a,b=c": credential})
    client.verify(server.client_final(client.final(server_first)))
    assert server.username == "a,b=c"


def test_wrong_password_unknown_user_and_few_iterations() -> None:
    credential = make_credential("SCRAM-SHA-512", "secret")
    client = ScramClientExchange("SCRAM-SHA-512", "alice", "guess")
    server = ScramServerExchange("SCRAM-SHA-512")
    server_first = server.client_first(client.first(), {"alice": credential})
    with pytest.raises(ScramError):
        server.client_final(client.final(server_first))
    with pytest.raises(ScramError):
        ScramServerExchange("SCRAM-SHA-512").client_first(
            ScramClientExchange("SCRAM-SHA-512", "bob", "x").first(), {"alice": credential})
    with pytest.raises(ValueError, match="less than the minimum 4096"):
        make_credential("SCRAM-SHA-256", "x", 1000)


def test_jaas_config() -> None:
    module = parse_single_login_module(
        'org.apache.kafka.common.security.plain.PlainLoginModule required\n'
        '  username="admin" password="a \\"quoted\\" secret;" user_alice=alice-secret;', "k")
    assert module.flag == "required"
    assert module.options == {"username": "admin", "password": 'a "quoted" secret;',
                              "user_alice": "alice-secret"}
    assert len(parse_jaas_config("a.B required; c.D optional x=1;")) == 2
    with pytest.raises(ValueError, match="should be 1 module"):
        parse_single_login_module("a.B required; c.D optional;", "k")
    for broken in ("a.B required username=x", "a.B maybe;", 'a.B required x="y;',
                   "a.B required x=;"):
        with pytest.raises(ValueError):
            parse_jaas_config(broken)
