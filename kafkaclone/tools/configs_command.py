"""kafka-configs: describe and change topic and broker configs, as Kafka 2.8's ConfigCommand.

    kafka-configs.sh --bootstrap-server h:p | --zookeeper h:p[/chroot]
        --entity-type topics|brokers|users|clients (--entity-name N | --entity-default)
        --describe [--all]
        --alter [--add-config k1=v1,k2=[a,b]] [--delete-config k1,k2]

Users (``--entity-type users``; with ``--zookeeper`` as Kafka 2.8 bootstraps SCRAM users,
with ``--bootstrap-server`` through AlterUserScramCredentials / DescribeUserScramCredentials):
``--add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret]'`` stores a SCRAM
credential (salt, StoredKey, ServerKey, iterations; never the password) in
``/config/users/<user>`` and notifies the brokers; ``--delete-config SCRAM-SHA-256`` removes
it; ``--describe`` shows only each mechanism's iteration count.

Client quotas (``--entity-type clients`` and/or ``users``, each with ``--entity-name`` or
``--entity-default``, Kafka 2.8's ClientQuotaEntity): ``--add-config
'producer_byte_rate=1048576,consumer_byte_rate=2097152,request_percentage=200'`` sets the
quotas of a client id, a user, or a user's client id (``--entity-type users --entity-name u
--entity-type clients --entity-name c``); with ``--bootstrap-server`` through
AlterClientQuotas / DescribeClientQuotas, with ``--zookeeper`` in ``/config/clients/<c>``,
``/config/users/<u>``, ``/config/users/<u>/clients/<c>`` directly.

With ``--bootstrap-server``: topics are changed with IncrementalAlterConfigs, brokers with
AlterConfigs (the complete new set of the broker's dynamic configs), and ``--describe``
lists the dynamic configs (all of them with ``--all``) with their synonyms, sorted by name.
With ``--zookeeper``: the ``/config/<type>/<name>`` znodes are read and written directly
(with a change notification). Output is Kafka's; an error prints one line and exits 1.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping, Sequence
from typing import TextIO

from kafkaclone.clients.admin import (
    BROKER,
    DELETE,
    SET,
    TOPIC,
    AdminClient,
    AlterConfigOp,
    ConfigEntry,
    ConfigResource,
)
from kafkaclone.common.errors import InvalidConfigError, KafkaError, ResourceNotFoundError
from kafkaclone.common.scram import (
    DEFAULT_ITERATIONS,
    MIN_ITERATIONS,
    SCRAM_MECHANISMS,
    ScramCredential,
    make_credential,
)
from kafkaclone.common.security import desanitize, sanitize
from kafkaclone.common.topic import validate_topic_name
from kafkaclone.tools.client_options import command_security
from kafkaclone.tools.command import (
    CommandError,
    CommandParser,
    UsageError,
    ZkSession,
    run_tool,
)
from kafkaclone.zk import client_quotas

ENTITY_TYPES = ("topics", "brokers", "users", "clients")
QUOTA_ENTITY_TYPES = {"users": client_quotas.USER, "clients": client_quotas.CLIENT_ID}
"""kafka-configs' entity types for quotas, and the ClientQuotaEntity type of each."""
_SCRAM_CREDENTIAL = re.compile(r"(?:iterations=([0-9]*),)?password=(.*)", re.DOTALL)
SOURCE_NAMES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG",
                5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG"}
_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"


def build_parser() -> argparse.ArgumentParser:
    p = CommandParser(prog="kafka-configs.sh",
                      description="Add/Remove entity config for a topic or broker.")
    p.add_argument("--bootstrap-server")
    p.add_argument("--zookeeper")
    p.add_argument("--command-config")
    p.add_argument("--entity-type", action="append", default=[])
    p.add_argument("--entity-name", action="append", default=[])
    # --entity-default stands for the default name among the --entity-name in order, so
    # "--entity-type users --entity-default --entity-type clients --entity-name c" pairs up.
    p.add_argument("--entity-default", action="append_const", const="", dest="entity_name")
    p.add_argument("--topic", help="Same as --entity-type topics --entity-name <topic>")
    p.add_argument("--broker", help="Same as --entity-type brokers --entity-name <id>")
    p.add_argument("--describe", action="store_true")
    p.add_argument("--alter", action="store_true")
    p.add_argument("--all", action="store_true")
    p.add_argument("--add-config")
    p.add_argument("--delete-config")
    return p


def parse_add_config(text: str | None) -> dict[str, str]:
    """Kafka's parseConfigsToBeAdded: commas outside [] separate pairs; [] are dropped."""
    if not text:
        return {}
    configs: dict[str, str] = {}
    for item in re.split("," + _OUTSIDE_BRACKETS, text):
        pair = re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, item)
        if len(pair) != 2:
            raise CommandError("Invalid entity config: all configs to be added must be in the "
                               "format \"key=val\".")
        configs[pair[0].strip()] = re.sub(r"\[?\]?", "", pair[1]).strip()
    return configs


def parse_delete_config(text: str | None) -> list[str]:
    return [] if not text else [k.strip() for k in text.split(",") if k.strip()]


def resolve_entity(opts: argparse.Namespace) -> tuple[str, str | None]:
    """(entity type, entity name: None for all, "" for the cluster default)."""
    types = list(opts.entity_type)
    names: list[str] = list(opts.entity_name)
    if opts.topic:
        types.append("topics")
        names.append(opts.topic)
    if opts.broker:
        types.append("brokers")
        names.append(opts.broker)
    if len(types) != 1:
        raise UsageError("Exactly one entity type (--entity-type topics|brokers|users|clients) "
                         "must be given")
    entity_type = types[0]
    if entity_type not in ENTITY_TYPES:
        raise UsageError(f"--entity-type must be one of {', '.join(ENTITY_TYPES)}: "
                         f"{entity_type} is not supported")
    if "" in names and entity_type not in ("brokers", "clients", "users"):
        raise UsageError("--entity-default is only supported for brokers, users and clients")
    if len(names) > 1:
        raise UsageError("Only one entity name may be given")
    name = names[0] if names else None
    if opts.alter and name is None:
        raise UsageError("--entity-name or --entity-default must be specified with --alter")
    if entity_type == "brokers" and name:
        try:
            int(name)
        except ValueError:
            raise CommandError(f"The entity name for {entity_type} must be a valid integer "
                               f"broker id, found: {name}") from None
    if entity_type == "topics" and name:
        validate_topic_name(name)
    return entity_type, name


def check_args(opts: argparse.Namespace) -> None:
    if bool(opts.describe) == bool(opts.alter):
        raise UsageError("Command must include exactly one action: --describe, --alter")
    if bool(opts.bootstrap_server) == bool(opts.zookeeper):
        raise UsageError("Only one of --bootstrap-server or --zookeeper must be specified")
    if opts.alter and not opts.add_config and not opts.delete_config:
        raise UsageError("At least one of --add-config or --delete-config must be specified "
                         "with --alter")
    if opts.all and not (opts.describe and opts.bootstrap_server):
        raise UsageError("--all can only be used with --describe and --bootstrap-server")


# --- the AdminClient path ----------------------------------------------------------------------


def _resource(entity_type: str, name: str) -> ConfigResource:
    return ConfigResource(TOPIC if entity_type == "topics" else BROKER, name)


def _dynamic_source(entity_type: str, name: str) -> int:
    if entity_type == "topics":
        return 1
    return 3 if name == "" else 2


def get_resource_config(admin: AdminClient, entity_type: str, name: str,
                        include_synonyms: bool, describe_all: bool) -> list[ConfigEntry]:
    resource = _resource(entity_type, name)
    found = admin.describe_configs([resource], include_synonyms=include_synonyms)[resource]
    if isinstance(found, KafkaError):
        raise found
    wanted = None if describe_all else _dynamic_source(entity_type, name)
    return sorted((e for e in found.values() if wanted is None or e.source == wanted),
                  key=lambda e: e.name)


def describe_admin(admin: AdminClient, entity_type: str, name: str | None, describe_all: bool,
                   out: TextIO) -> None:
    if name is not None:
        entities = [name]
    elif entity_type == "topics":
        entities = admin.list_topics(include_internal=True)
    else:
        entities = [str(n.id) for n in admin.describe_cluster().nodes] + [""]
    for entity in entities:
        if entity == "" and entity_type == "brokers":
            out.write(f"Default configs for {entity_type} in the cluster are:\n")
        else:
            kind = "All" if describe_all else "Dynamic"
            out.write(f"{kind} configs for {entity_type[:-1]} {entity} are:\n")
        for entry in get_resource_config(admin, entity_type, entity, True, describe_all):
            synonyms = ", ".join(f"{SOURCE_NAMES.get(s.source, s.source)}:{s.name}="
                                 f"{_show(s.value)}" for s in entry.synonyms)
            out.write(f"  {entry.name}={_show(entry.value)} "
                      f"sensitive={'true' if entry.is_sensitive else 'false'} "
                      f"synonyms={{{synonyms}}}\n")


def _show(value: str | None) -> str:
    return "null" if value is None else value


def alter_admin(admin: AdminClient, entity_type: str, name: str, to_add: dict[str, str],
                to_delete: list[str], out: TextIO) -> None:
    old = {e.name: e for e in get_resource_config(admin, entity_type, name, False, False)}
    invalid = [k for k in to_delete if k not in old]
    if invalid:
        raise InvalidConfigError(f"Invalid config(s): {','.join(invalid)}")
    resource = _resource(entity_type, name)
    if entity_type == "topics":
        ops = [AlterConfigOp(k, v, SET) for k, v in to_add.items()]
        ops += [AlterConfigOp(k, "", DELETE) for k in to_delete]
        error = admin.incremental_alter_configs({resource: ops})[resource]
    else:
        entries: dict[str, str | None] = {k: e.value for k, e in old.items()}
        entries.update(to_add)
        for k in to_delete:
            entries.pop(k, None)
        sensitive = sorted(k for k, v in entries.items() if v is None)
        if sensitive:
            raise InvalidConfigError("All sensitive broker config entries must be specified "
                                     f"for --alter, missing entries: {', '.join(sensitive)}")
        complete = {k: v for k, v in entries.items() if v is not None}
        error = admin.alter_configs({resource: complete})[resource]
    if error is not None:
        raise error
    if name:
        out.write(f"Completed updating config for {entity_type[:-1]} {name}.\n")
    else:
        out.write(f"Completed updating default config for {entity_type} in the cluster.\n")


# --- the ZooKeeper path ----------------------------------------------------------------------


def _entity_label(entity_type: str, name: str) -> str:
    if name == "<default>":
        return f"default {entity_type}"
    return f"{'topic' if entity_type == 'topics' else entity_type} '{name}'"


def parse_scram_credential(mechanism: str, text: str) -> tuple[int, str]:
    """``[iterations=n,]password=p`` -> (iterations, password); ValueError with Kafka's
    message (the password not repeated) if malformed or too few iterations."""
    match = _SCRAM_CREDENTIAL.fullmatch(text)
    if match is None:
        raise ValueError(f"Invalid credential property {mechanism}={text.split('password=')[0]}"
                         "password=[hidden]")
    iterations = int(match.group(1)) if match.group(1) else DEFAULT_ITERATIONS
    if iterations < MIN_ITERATIONS:
        raise ValueError(f"Iterations {iterations} is less than the minimum {MIN_ITERATIONS} "
                         f"required for {mechanism}")
    return iterations, match.group(2)


def describe_users_admin(admin: AdminClient, name: str | None, out: TextIO) -> None:
    """DescribeUserScramCredentials, printed as Kafka 2.8's ConfigCommand does."""
    try:
        described = admin.describe_user_scram_credentials(None if name is None else [name])
    except ResourceNotFoundError:
        return
    for user, mechanisms in described.items():
        shown = ", ".join(f"{mechanism}=iterations={iterations}"
                          for mechanism, iterations in mechanisms.items())
        out.write(f"SCRAM credential configs for user-principal '{user}' are {shown}\n")


def alter_user_admin(admin: AdminClient, name: str, to_add: dict[str, str],
                     to_delete: list[str], out: TextIO) -> None:
    """AlterUserScramCredentials: the password is salted by the client, never sent."""
    others = [key for key in [*to_add, *to_delete] if key not in SCRAM_MECHANISMS]
    if others:
        raise CommandError(f"Only SCRAM credentials can be altered for users here, not "
                           f"{', '.join(others)}")
    upsertions = [(name, mechanism, *parse_scram_credential(mechanism, value))
                  for mechanism, value in to_add.items()]
    deletions = [(name, mechanism) for mechanism in to_delete]
    results = admin.alter_user_scram_credentials(upsertions, deletions)
    error = results.get(name)
    if error is not None:
        raise error
    out.write(f"Completed updating config for user {name}.\n")


def scram_credential_config(mechanism: str, text: str) -> str:
    """``[iterations=n,]password=p`` -> Kafka's stored credential (ConfigCommand's
    scramCredential)."""
    iterations, password = parse_scram_credential(mechanism, text)
    return make_credential(mechanism, password, iterations).to_config_value()


def _shown_user_config(key: str, value: str) -> str:
    """A user's config as --describe shows it: a SCRAM credential by its iterations only."""
    if key in SCRAM_MECHANISMS:
        try:
            return f"{key}=iterations={ScramCredential.from_config_value(value).iterations}"
        except ValueError:
            return f"{key}=[invalid]"
    return f"{key}={value}"


def describe_zk(session: ZkSession, entity_type: str, name: str | None, out: TextIO) -> None:
    if name is None:
        names = session.run(session.zk.get_all_entities_with_config(entity_type))
    elif entity_type == "users":
        names = [sanitize(name)]
    else:
        names = [name or "<default>"]
    for entity in names:
        configs = session.run(session.admin.fetch_entity_config(entity_type, entity))
        if entity_type == "users":
            shown = ",".join(_shown_user_config(k, v) for k, v in configs.items())
            out.write(f"Configs for user-principal '{desanitize(entity)}' are {shown}\n")
            continue
        shown = ",".join(f"{k}={v}" for k, v in configs.items())
        out.write(f"Configs for {_entity_label(entity_type, entity)} are {shown}\n")


def alter_zk(session: ZkSession, entity_type: str, name: str, to_add: dict[str, str],
             to_delete: list[str], out: TextIO) -> None:
    if entity_type == "users":
        alter_user_zk(session, name, to_add, to_delete, out)
        return
    entity = name or "<default>"
    configs = session.run(session.admin.fetch_entity_config(entity_type, entity))
    invalid = [k for k in to_delete if k not in configs]
    if invalid:
        raise InvalidConfigError(f"Invalid config(s): {','.join(invalid)}")
    configs.update(to_add)
    for key in to_delete:
        configs.pop(key, None)
    if entity_type == "topics":
        session.run(session.admin.change_topic_config(entity, configs))
    else:
        session.run(session.admin.change_broker_config(int(name) if name else None, configs))
    out.write(f"Completed updating config for entity: {_entity_label(entity_type, entity)}.\n")


def alter_user_zk(session: ZkSession, name: str, to_add: dict[str, str],
                  to_delete: list[str], out: TextIO) -> None:
    """Kafka's ConfigCommand.alterConfig for users in ZooKeeper: SCRAM passwords become
    credentials before anything is written."""
    entity = sanitize(name)
    configs = session.run(session.admin.fetch_entity_config("users", entity))
    invalid = [k for k in to_delete if k not in configs]
    if invalid:
        raise InvalidConfigError(f"Invalid config(s): {','.join(invalid)}")
    for key, value in to_add.items():
        configs[key] = scram_credential_config(key, value) if key in SCRAM_MECHANISMS else value
    for key in to_delete:
        configs.pop(key, None)
    session.run(session.zk.set_or_create_entity_configs("users", entity, configs))
    session.run(session.zk.create_config_change_notification(f"users/{entity}"))
    out.write(f"Completed updating config for entity: user-principal '{name}'.\n")


# --- main --------------------------------------------------------------------------------------


def parse_options(argv: Sequence[str] | None) -> argparse.Namespace:
    opts = build_parser().parse_args(argv)
    check_args(opts)
    return opts


def is_quota_command(opts: argparse.Namespace, to_add: dict[str, str],
                     to_delete: list[str]) -> bool:
    """Whether the command is about client quotas: a clients entity, a user with a client,
    or quota configs to change (a users entity otherwise means SCRAM credentials)."""
    types = set(opts.entity_type)
    if "clients" in types or len(opts.entity_type) > 1:
        return True
    return "users" in types and any(key in client_quotas.QUOTA_CONFIG_TYPES
                                    for key in [*to_add, *to_delete])


def resolve_quota_entity(opts: argparse.Namespace) -> list[tuple[str, str | None]]:
    """[(kafka-configs entity type, name: None for all, "" for the default)], users first
    (the znode path order)."""
    types: list[str] = list(opts.entity_type)
    names: list[str] = list(opts.entity_name)
    if not types or len(set(types)) != len(types) or not set(types) <= set(QUOTA_ENTITY_TYPES):
        raise UsageError("Only 'users' and 'clients' entity types may be combined, each once")
    if len(names) > len(types):
        raise UsageError("More entity names than entity types were given")
    if opts.alter and len(names) != len(types):
        raise UsageError("--entity-name or --entity-default must be specified with --alter "
                         "for every entity type")
    paired = [(entity_type, names[i] if i < len(names) else None)
              for i, entity_type in enumerate(types)]
    return sorted(paired, key=lambda pair: pair[0] != "users")


def _quota_entity(entity: Sequence[tuple[str, str | None]]) -> client_quotas.Entity:
    return {QUOTA_ENTITY_TYPES[entity_type]: name or None for entity_type, name in entity}


def _quota_value(key: str, text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InvalidConfigError(f"Invalid value {text} for configuration {key}") from None


def _show_quota_entity(entity: Mapping[str, str | None]) -> str:
    """ConfigCommand's description of a ClientQuotaEntity."""
    labels = {client_quotas.USER: "user-principal", client_quotas.CLIENT_ID: "client-id"}
    parts = []
    for entity_type in (client_quotas.USER, client_quotas.CLIENT_ID):
        if entity_type in entity:
            name = entity[entity_type]
            label = labels[entity_type]
            parts.append(f"the default {label}" if name is None else f"{label} '{name}'")
    return ", ".join(parts)


def _java_double(value: float) -> str:
    """Java's Double.toString for the values quotas take (1048576.0, 200.0, 0.5)."""
    return repr(float(value))


def _quota_ops(to_add: dict[str, str], to_delete: list[str]) -> dict[str, float | None]:
    unknown = [key for key in [*to_add, *to_delete] if key not in client_quotas.QUOTA_CONFIG_TYPES]
    if unknown:
        raise InvalidConfigError(f"Invalid config(s): {','.join(unknown)}")
    ops: dict[str, float | None] = {key: _quota_value(key, text) for key, text in to_add.items()}
    ops.update(dict.fromkeys(to_delete))
    return ops


def _quota_filter(entity: Sequence[tuple[str, str | None]]) -> list[tuple[str, int, str | None]]:
    components: list[tuple[str, int, str | None]] = []
    for entity_type, name in entity:
        quota_type = QUOTA_ENTITY_TYPES[entity_type]
        if name is None:
            components.append((quota_type, client_quotas.MATCH_SPECIFIED, None))
        elif name == "":
            components.append((quota_type, client_quotas.MATCH_DEFAULT, None))
        else:
            components.append((quota_type, client_quotas.MATCH_EXACT, name))
    return components


def run_quota_command(opts: argparse.Namespace, to_add: dict[str, str], to_delete: list[str],
                      out: TextIO) -> None:
    """Kafka 2.8's ConfigCommand for client quotas."""
    entity = resolve_quota_entity(opts)
    if opts.bootstrap_server:
        with AdminClient(opts.bootstrap_server, client_id="kafka-configs",
                         security=command_security(opts.command_config)) as admin:
            if opts.alter:
                error = admin.alter_client_quotas(
                    [(_quota_entity(entity), _quota_ops(to_add, to_delete))])[0]
                if error is not None:
                    raise error
                entity_type, name = entity[0]
                out.write(f"Completed updating config for {entity_type[:-1]} {name}.\n")
                return
            for found, quotas in admin.describe_client_quotas(_quota_filter(entity),
                                                              strict=True):
                shown = ", ".join(f"{key}={_java_double(value)}"
                                  for key, value in quotas.items())
                out.write(f"Quota configs for {_show_quota_entity(found)} are {shown}\n")
        return
    session = ZkSession(opts.zookeeper)
    try:
        if opts.alter:
            ops = _quota_ops(to_add, to_delete)
            session.run(client_quotas.alter_client_quotas(session.zk, _quota_entity(entity),
                                                          list(ops.items())))
            out.write("Completed updating config for entity: "
                      f"{_zk_entity_label(_quota_entity(entity))}.\n")
            return
        filters = [client_quotas.FilterComponent(QUOTA_ENTITY_TYPES[entity_type], name or None,
                                                 any_name=name is None)
                   for entity_type, name in entity]
        for found, quotas in session.run(client_quotas.describe_client_quotas(
                session.zk, filters, strict=True)):
            shown = ",".join(f"{key}={_zk_quota_text(key, value)}"
                             for key, value in quotas.items())
            out.write(f"Configs for {_zk_entity_label(found)} are {shown}\n")
    finally:
        session.close()


def _zk_entity_label(entity: Mapping[str, str | None]) -> str:
    """ConfigCommand's ConfigEntity.toString: ``user-principal 'u', client-id 'c'``,
    ``default client-id``."""
    labels = {client_quotas.USER: "user-principal", client_quotas.CLIENT_ID: "client-id"}
    parts = []
    for entity_type in (client_quotas.USER, client_quotas.CLIENT_ID):
        if entity_type in entity:
            name = entity[entity_type]
            label = labels[entity_type]
            parts.append(f"default {label}" if name is None else f"{label} '{name}'")
    return ", ".join(parts)


def _zk_quota_text(key: str, value: float) -> str:
    return client_quotas.quota_value_text(key, value)


def run_command(opts: argparse.Namespace, out: TextIO) -> None:
    to_add = parse_add_config(opts.add_config)
    to_delete = parse_delete_config(opts.delete_config)
    if is_quota_command(opts, to_add, to_delete):
        run_quota_command(opts, to_add, to_delete, out)
        return
    entity_type, name = resolve_entity(opts)
    if opts.bootstrap_server and entity_type == "users":
        with AdminClient(opts.bootstrap_server, client_id="kafka-configs",
                         security=command_security(opts.command_config)) as admin:
            if opts.describe:
                describe_users_admin(admin, name, out)
            else:
                assert name is not None
                alter_user_admin(admin, name, to_add, to_delete, out)
        return
    if opts.bootstrap_server:
        with AdminClient(opts.bootstrap_server, client_id="kafka-configs",
                         security=command_security(opts.command_config)) as admin:
            if opts.describe:
                describe_admin(admin, entity_type, name, opts.all, out)
            else:
                assert name is not None
                alter_admin(admin, entity_type, name, to_add, to_delete, out)
    else:
        session = ZkSession(opts.zookeeper)
        try:
            if opts.describe:
                describe_zk(session, entity_type, name, out)
            else:
                assert name is not None
                alter_zk(session, entity_type, name, to_add, to_delete, out)
        finally:
            session.close()


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr

    def report(exc: Exception) -> None:
        err.write(f"{exc}\n")  # Kafka prints these messages alone

    def report_kafka_error(exc: Exception) -> None:
        assert isinstance(exc, KafkaError)
        args = " ".join(sys.argv[1:] if argv is None else argv)
        err.write(f"Error while executing config command with args '{args}': "
                  f"{exc.name}: {exc}\n")

    return run_tool(argv, parse_options, lambda opts: run_command(opts, out), out=out, err=err,
                    failures={(CommandError, InvalidConfigError, ValueError): report,
                              (KafkaError,): report_kafka_error})


if __name__ == "__main__":
    sys.exit(main())
