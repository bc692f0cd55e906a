"""A local cluster for tests: a real ZooKeeper and N broker processes.

``LocalCluster`` starts ZooKeeper (:class:`kafkaclone.testing.zookeeper.ZooKeeperServer`)
and N brokers, each a process started through ``scripts/kafka-server-start.sh`` on a free
127.0.0.1 port, and waits (bounded) until every broker is registered under
``/brokers/ids``::

    with LocalCluster(3, overrides={"zookeeper.session.timeout.ms": "6000"}) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        cluster.broker(1).kill()      # SIGKILL
        cluster.broker(1).start()     # same id, port and data

Everything it started is stopped (by pid, never by name) when the ``with`` block ends,
whether or not the test failed. Broker ids are 1..N. Nothing here touches the reactor:
use it from test code.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Final

from kazoo.client import KazooClient

from kafkaclone.clients.connection import BrokerConnection
from kafkaclone.common.errors import KafkaError
from kafkaclone.protocol.api import APIS
from kafkaclone.protocol.api_keys import ApiKey
from kafkaclone.testing.zookeeper import ZooKeeperServer, free_port

logger = logging.getLogger(__name__)

REPO_ROOT: Final = Path(__file__).resolve().parents[2]
START_SCRIPT: Final = REPO_ROOT / "scripts" / "kafka-server-start.sh"

DEFAULT_BROKER_CONFIG: Final[Mapping[str, str]] = {
    "num.partitions": "1",
    "default.replication.factor": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "zookeeper.session.timeout.ms": "6000",
    "controlled.shutdown.retry.backoff.ms": "500",
    "log.retention.check.interval.ms": "300000",
}
"""What a test cluster starts with (overrides go on top)."""


class ClusterStartError(RuntimeError):
    """A broker exited or did not register in time."""


class BrokerProcess:
    """One broker process of a LocalCluster."""

    def __init__(self, broker_id: int, port: int, config_path: Path, log_path: Path) -> None:
        self.listener_ports: dict[str, int] = {}
        """Listener name -> port, for the cluster's extra listeners."""
        self.broker_id = broker_id
        self.port = port
        self.config_path = config_path
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def __repr__(self) -> str:
        return f"BrokerProcess(id={self.broker_id}, port={self.port}, pid={self.pid})"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def returncode(self) -> int | None:
        return self._process.returncode if self._process is not None else None

    @property
    def bootstrap_server(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start the process (not waiting for its registration; see LocalCluster)."""
        if self.running:
            return
        self._close_log()
        self._log = open(self.log_path, "ab")  # closed when the process is reaped
        command = [str(START_SCRIPT), str(self.config_path)]
        if not START_SCRIPT.is_file():  # an installed package without the checkout's scripts
            command = [sys.executable, "-m", "kafkaclone.tools.server_start",
                       str(self.config_path)]
        self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=self._log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        logger.info("broker %d started, pid %d", self.broker_id, self._process.pid)

    def kill(self) -> None:
        """SIGKILL: the broker dies without a word (its znode goes with its session)."""
        self._signal(signal.SIGKILL)
        self.wait(10)

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM (a controlled shutdown) and wait; SIGKILL after ``timeout`` seconds."""
        if not self.running:
            self._reap()
            return
        self._signal(signal.SIGTERM)
        try:
            self.wait(timeout)
        except subprocess.TimeoutExpired:
            logger.warning("broker %d ignored SIGTERM for %ss, killing it", self.broker_id,
                           timeout)
            self.kill()

    def suspend(self) -> None:
        """SIGSTOP (freeze it, e.g. until its session expires)."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def wait(self, timeout: float) -> int:
        assert self._process is not None
        code = self._process.wait(timeout)
        self._reap()
        return code

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _signal(self, signum: int) -> None:
        if self._process is not None and self._process.poll() is None:
            os.kill(self._process.pid, signum)

    def _reap(self) -> None:
        if self._process is not None and self._process.poll() is not None:
            self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


class LocalCluster:
    """ZooKeeper + ``num_brokers`` broker processes on 127.0.0.1; see the module docstring.

    ``base_dir`` holds ZooKeeper's data, each broker's properties file, log dir and output
    (a temporary directory, removed at the end, if not given). ``overrides`` are broker
    config keys on top of :data:`DEFAULT_BROKER_CONFIG`, ``broker_overrides`` those of one
    broker on top of them (``{1: {"broker.rack": "a"}}``); ``chroot`` puts the cluster
    under a ZooKeeper path. ``extra_listeners`` are listener names (``SASL_SSL``, ``SSL``,
    or names given a protocol by ``listener.security.protocol.map`` in ``overrides``) each
    broker serves besides its PLAINTEXT one (which the cluster uses to see the brokers
    up); their ports are in ``BrokerProcess.listener_ports``.
    """

    def __init__(self, num_brokers: int = 3, *, base_dir: str | os.PathLike[str] | None = None,
                 overrides: Mapping[str, str] | None = None,
                 broker_overrides: Mapping[int, Mapping[str, str]] | None = None,
                 chroot: str = "", startup_timeout: float = 60.0,
                 extra_listeners: Sequence[str] = ()) -> None:
        if num_brokers < 1:
            raise ValueError("a cluster needs at least one broker")
        self.num_brokers = num_brokers
        self._temp: tempfile.TemporaryDirectory[str] | None = None
        if base_dir is None:
            self._temp = tempfile.TemporaryDirectory(prefix="kafkaclone-cluster-")
            base_dir = self._temp.name
        self.base_dir = Path(base_dir)
        self.overrides = dict(overrides or {})
        self.broker_overrides = {b: dict(o) for b, o in (broker_overrides or {}).items()}
        self.extra_listeners = tuple(name.upper() for name in extra_listeners)
        self.chroot = "/" + chroot.strip("/") if chroot.strip("/") else ""
        self.startup_timeout = startup_timeout
        self.zookeeper = ZooKeeperServer(data_dir=self.base_dir / "zookeeper")
        self.brokers: dict[int, BrokerProcess] = {}

    # -- addresses -----------------------------------------------------------------------

    @property
    def zookeeper_connect(self) -> str:
        """``host:port[/chroot]``, the brokers' zookeeper.connect."""
        return self.zookeeper.connect_string + self.chroot

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap_server for _, b in sorted(self.brokers.items()))

    def bootstrap_servers_for(self, listener_name: str) -> str:
        """The brokers' addresses on one of ``extra_listeners``."""
        return ",".join(f"127.0.0.1:{b.listener_ports[listener_name.upper()]}"
                        for _, b in sorted(self.brokers.items()))

    def broker(self, broker_id: int) -> BrokerProcess:
        return self.brokers[broker_id]

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> LocalCluster:
        """Start ZooKeeper and every broker; return once all are registered."""
        try:
            self.base_dir.mkdir(parents=True, exist_ok=True)
            self.zookeeper.start()
            for broker_id in range(1, self.num_brokers + 1):
                if broker_id not in self.brokers:
                    self.brokers[broker_id] = self._new_broker(broker_id)
                self.brokers[broker_id].start()
            self.wait_for_brokers(list(self.brokers))
        except BaseException:
            self.close()
            raise
        return self

    def _new_broker(self, broker_id: int) -> BrokerProcess:
        port = free_port()
        listener_ports = {name: free_port() for name in self.extra_listeners}
        listeners = ",".join([f"PLAINTEXT://127.0.0.1:{port}", *(
            f"{name}://127.0.0.1:{extra}" for name, extra in listener_ports.items())])
        props = {
            **DEFAULT_BROKER_CONFIG,
            "broker.id": str(broker_id),
            "listeners": listeners,
            "log.dirs": str(self.base_dir / f"broker-{broker_id}" / "data"),
            "zookeeper.connect": self.zookeeper_connect,
            **self.overrides,
            **self.broker_overrides.get(broker_id, {}),
        }
        config_path = self.base_dir / f"server-{broker_id}.properties"
        config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        process = BrokerProcess(broker_id, port, config_path,
                                self.base_dir / f"broker-{broker_id}.log")
        process.listener_ports.update(listener_ports)
        return process

    def registered_broker_ids(self) -> list[int]:
        client = KazooClient(hosts=self.zookeeper.connect_string, timeout=10.0)
        client.start(timeout=10)
        path = f"{self.chroot}/brokers/ids"
        try:
            if client.exists(path) is None:
                return []
            return sorted(int(child) for child in client.get_children(path))
        finally:
            client.stop()
            client.close()

    def wait_for_brokers(self, broker_ids: list[int], timeout: float | None = None) -> None:
        """Wait until exactly these brokers are registered (ClusterStartError if one of
        them exits, or after ``timeout``, default the startup timeout)."""
        deadline = time.monotonic() + (timeout or self.startup_timeout)
        wanted = sorted(broker_ids)
        while True:
            for broker_id in wanted:
                process = self.brokers[broker_id]
                if not process.running:
                    raise ClusterStartError(
                        f"broker {broker_id} exited with {process.returncode}:\n"
                        f"{process.log_tail()}")
            registered = self.registered_broker_ids()
            if all(b in registered for b in wanted) and all(
                self._serves_metadata(b, registered) for b in wanted
            ):
                return
            if time.monotonic() > deadline:
                raise ClusterStartError(f"brokers {wanted} not all registered (only "
                                        f"{registered}) within the timeout")
            time.sleep(0.1)

    def _serves_metadata(self, broker_id: int, registered: list[int]) -> bool:
        """Whether the broker's metadata cache knows the controller and every registered
        broker yet. Between its registration and the controller's first UpdateMetadata a
        broker answers Metadata with no brokers, which clients such as librdkafka's admin
        take as "no controller" and do not retry soon: a started cluster is one whose
        brokers answer Metadata fully."""
        request_cls = APIS[ApiKey.METADATA].request
        body = request_cls(topics=[], allow_auto_topic_creation=False,
                           include_cluster_authorized_operations=False,
                           include_topic_authorized_operations=False)
        try:
            with BrokerConnection("127.0.0.1", self.brokers[broker_id].port,
                                  request_timeout_ms=5_000) as conn:
                _, response = conn.request(ApiKey.METADATA, body, max_version=9)
        except (OSError, KafkaError):
            return False
        known = {b.node_id for b in response.brokers}
        return response.controller_id >= 0 and all(b in known for b in registered)

    def restart_broker(self, broker_id: int) -> None:
        """Start a stopped or killed broker again and wait for its registration. After a
        kill -9 its old registration lives until its ZooKeeper session expires, and a broker
        whose id is still registered refuses to start (as Kafka's does): wait for it first."""
        deadline = time.monotonic() + self.startup_timeout
        while broker_id in self.registered_broker_ids():
            if time.monotonic() > deadline:
                raise ClusterStartError(
                    f"broker {broker_id}'s old registration did not go within the timeout")
            time.sleep(0.2)
        self.brokers[broker_id].start()
        self.wait_for_brokers([broker_id])

    def close(self) -> None:
        """Stop every broker (SIGTERM, SIGKILL if it hangs), then ZooKeeper; remove the
        temporary directory."""
        for broker_id, process in sorted(self.brokers.items(), reverse=True):
            try:
                process.resume()
                process.stop(timeout=30)
            except Exception:
                logger.exception("could not stop broker %d", broker_id)
                process.kill()
        self.zookeeper.close()
        if self._temp is not None:
            self._temp.cleanup()
            self._temp = None

    def pids(self) -> list[int]:
        """The pids of every process this cluster has running."""
        pids = [p.pid for p in self.brokers.values() if p.running and p.pid is not None]
        if self.zookeeper.pid is not None and self.zookeeper.running:
            pids.append(self.zookeeper.pid)
        return pids

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
