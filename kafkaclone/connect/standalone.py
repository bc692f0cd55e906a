"""``connect-standalone.sh worker.properties connector.properties...``: Kafka's
``ConnectStandalone``. One process runs every connector given, keeps source offsets in
``offset.storage.file.filename`` and serves the REST API (``listeners``, else
``rest.host.name``:``rest.port``, default port 8083) on the reactor thread; tasks run in
threads of their own. SIGTERM or SIGINT stops the tasks, committing their offsets.
"""

from __future__ import annotations

import logging
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from kafkaclone.clients.admin import AdminClient
from kafkaclone.common.config_def import AbstractConfig
from kafkaclone.common.errors import KafkaError
from kafkaclone.common.properties import parse_properties
from kafkaclone.connect.config import WORKER_CONFIG
from kafkaclone.connect.herder import RestError, StandaloneHerder
from kafkaclone.connect.offsets import FileOffsetBackingStore
from kafkaclone.connect.plugins import Plugins
from kafkaclone.connect.rest import ConnectRestResource
from kafkaclone.connect.worker import WorkerSettings

logger = logging.getLogger(__name__)


def listen_address(config: AbstractConfig) -> tuple[str, int]:
    """The REST listener: the first of ``listeners`` (``http://host:port``), else
    ``rest.host.name`` / ``rest.port``."""
    listeners = config.get("listeners")
    if isinstance(listeners, tuple) and listeners:
        parsed = urlparse(listeners[0])
        return parsed.hostname or "0.0.0.0", parsed.port or 8083
    return config.get_optional_str("rest.host.name") or "0.0.0.0", config.get_int("rest.port")


def worker_settings(props: dict[str, str], config: AbstractConfig, host: str, port: int
                    ) -> WorkerSettings:
    advertised = config.get_optional_str("rest.advertised.host.name") or (
        socket.gethostname() if host in ("0.0.0.0", "") else host)
    return WorkerSettings(
        worker_id=f"{advertised}:{port}",
        bootstrap_servers=",".join(config.get_list("bootstrap.servers")),
        offset_flush_interval_s=config.get_int("offset.flush.interval.ms") / 1000.0,
        offset_flush_timeout_s=config.get_int("offset.flush.timeout.ms") / 1000.0,
        key_converter=config.get_str("key.converter"),
        value_converter=config.get_str("value.converter"),
        worker_props=props)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print("Usage: ConnectStandalone worker.properties [connector1.properties "
              "connector2.properties ...]", file=sys.stderr)
        return 1
    logging.basicConfig(level=logging.INFO,
                        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)")
    props = parse_properties(Path(args[0]).read_text(encoding="utf-8"))
    config = AbstractConfig(WORKER_CONFIG, {k: v for k, v in props.items()
                                            if k in WORKER_CONFIG})
    host, port = listen_address(config)
    settings = worker_settings(props, config, host, port)
    cluster_id = None
    admin = AdminClient(settings.bootstrap_servers)
    try:
        cluster_id = admin.describe_cluster().cluster_id
    except KafkaError as exc:
        logger.warning("Could not read the Kafka cluster id: %s", exc)
    finally:
        admin.close()
    plugins = Plugins()
    offsets = FileOffsetBackingStore(config.get_optional_str("offset.storage.file.filename"))
    herder = StandaloneHerder(settings, plugins, offsets)

    from twisted.internet import reactor as global_reactor
    from twisted.internet.threads import deferToThread
    from twisted.web.server import Site

    reactor: Any = global_reactor  # the global reactor's type is a module

    site = Site(ConnectRestResource(herder, plugins, cluster_id, deferToThread))  # type: ignore[no-untyped-call]
    reactor.listenTCP(port, site, interface=host)
    logger.info("REST server listening at http://%s:%d/, advertising URL http://%s/", host,
                port, settings.worker_id)
    for path in args[1:]:
        connector_props = parse_properties(Path(path).read_text(encoding="utf-8"))
        name = connector_props.get("name", "")
        try:
            herder.put_connector_config(name, connector_props, allow_replace=False)
        except RestError as exc:
            logger.error("Failed to create job for %s: %s", path, exc.message)
            herder.stop()
            return 1
        logger.info("Created connector %s", name)
    reactor.addSystemEventTrigger("before", "shutdown", herder.stop)
    reactor.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
