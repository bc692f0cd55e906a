"""ZooKeeper and kafkaclone brokers as Docker containers, and the faults we inflict on them.

Every container and network carries the run's label (``kafkaclone-test-run``) and a name
prefixed with the run id, and every object removes what it created (``close()``), also when a
test fails; nothing relies on Ryuk (``TESTCONTAINERS_RYUK_DISABLED=true``).

Addressing: inside the suite's network each node has its alias (``zk-1``, ``broker-2``);
brokers talk to each other on their INTERNAL listener (``broker-N:9092``), and publish an
EXTERNAL listener on ``127.0.0.1:<host port>`` that the test process uses (the port is chosen
before the container starts, so it survives restarts and is what the broker advertises).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import random
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import docker
from kazoo.client import KazooClient
from testcontainers.core.container import DockerContainer
from testcontainers.core.network import Network

from kafkaclone.clients.connection import BrokerConnection
from kafkaclone.common.errors import KafkaError
from kafkaclone.protocol.api import APIS
from kafkaclone.protocol.api_keys import ApiKey

from . import zktxn

logger = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[1]
RUN_ID = uuid.uuid4().hex[:8]
LABEL = "kafkaclone-test-run"
ZK_CLIENT_PORT = 2181
INTERNAL_PORT = 9092
EXTERNAL_PORT = 9093
ZK_CLASSPATH = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"
ZK_JVM = "-Xms32m -Xmx192m -XX:+UseSerialGC -XX:TieredStopAtLevel=1"
# Debugging aids (docs/testing.md): a directory that receives every node's whole log when its
# cluster is removed, and the brokers' KAFKACLONE_LOG_LEVEL.
LOGS_DIR = os.environ.get("KAFKACLONE_CONTAINER_LOGS", "")
BROKER_LOG_LEVEL = os.environ.get("KAFKACLONE_CONTAINER_LOG_LEVEL", "INFO")

T = TypeVar("T")


def _print_line(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# Where progress lines go; the suite's conftest points it past pytest's output capture.
progress_sink: Callable[[str], None] = _print_line


def progress(message: str) -> None:
    """One timestamped progress line (on the terminal while pytest runs the suite)."""
    line = f"[containers {time.strftime('%H:%M:%S')}] {message}"
    logger.info("%s", line)
    progress_sink(line)


_docker_client: docker.DockerClient | None = None


def docker_client() -> docker.DockerClient:
    """One Docker API client for the fault helpers (closed by ``close_docker_client``)."""
    global _docker_client
    if _docker_client is None:
        _docker_client = docker.from_env()
    return _docker_client


def close_docker_client() -> None:
    global _docker_client
    if _docker_client is not None:
        _docker_client.close()
        _docker_client = None


def remove_run_leftovers() -> None:
    """Remove every container and network this run labelled (whatever a crash left)."""
    client = docker_client()
    for container in client.containers.list(all=True, filters={"label": f"{LABEL}={RUN_ID}"}):
        with contextlib.suppress(docker.errors.APIError):
            if container.status == "paused":
                container.unpause()
            container.remove(force=True, v=True)
            progress(f"removed leftover container {container.name}")
    for network in client.networks.list(filters={"label": f"{LABEL}={RUN_ID}"}):
        with contextlib.suppress(docker.errors.APIError):
            network.remove()
            progress(f"removed leftover network {network.name}")


def free_port() -> int:
    """A free host port below the kernel's ephemeral range (32768 and up on Linux): a port
    kept for a container across its restarts must not be taken meanwhile by some client's
    outgoing connection, which the ephemeral range is for ("port is already allocated")."""
    for _ in range(200):
        port = random.randint(20_000, 32_000)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 20000-32000")


def wait_until(predicate: Callable[[], T], timeout: float, what: str,
               interval: float = 0.25) -> T:
    """Poll ``predicate`` until it returns something truthy; TimeoutError naming ``what``."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            result = predicate()
            if result:
                return result
        except Exception as exc:  # the thing polled is allowed to be down meanwhile
            last_error = exc
        if time.monotonic() > deadline:
            detail = f" (last error: {last_error!r})" if last_error else ""
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")
        time.sleep(interval)


def build_image() -> str:
    """Build (or reuse) the test image; returns its tag."""
    completed = subprocess.run(
        ["bash", str(REPO_ROOT / "scripts" / "build-test-image.sh")],
        check=False, capture_output=True, text=True, timeout=1800,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"build-test-image.sh failed:\n{completed.stderr[-4000:]}")
    for line in completed.stderr.splitlines():
        progress(line)
    return completed.stdout.strip().splitlines()[-1]


class SuiteNetwork:
    """A user-defined bridge network for one cluster, removed by ``close()``."""

    def __init__(self) -> None:
        self._network = Network(docker_network_kw={"labels": {LABEL: RUN_ID}})
        self._network.name = f"kc-{RUN_ID}-{uuid.uuid4().hex[:6]}"
        self._network.create()
        self.name = self._network.name

    def docker_network(self) -> Any:
        return docker_client().networks.get(self.name)

    def close(self) -> None:
        with contextlib.suppress(docker.errors.NotFound):
            self._network.remove()


class Node:
    """One container: a ZooKeeper server or a broker, with the fault helpers."""

    def __init__(self, image: str, alias: str, network: SuiteNetwork, command: list[str],
                 published: dict[int, int] | None = None, *, net_admin: bool = False,
                 env: dict[str, str] | None = None, hostname: str | None = None) -> None:
        self.alias = alias
        self.network = network
        self.container_name = f"kc-{RUN_ID}-{alias}-{uuid.uuid4().hex[:4]}"
        extra: dict[str, Any] = {"labels": {LABEL: RUN_ID}, "init": True,
                                 "stop_signal": "SIGTERM"}
        if net_admin:
            extra["cap_add"] = ["NET_ADMIN"]
        if hostname is not None:
            extra["hostname"] = hostname
        self._container = DockerContainer(image, name=self.container_name, **extra)
        self._container.with_command(command)
        for key, value in (env or {}).items():
            self._container.with_env(key, value)
        self._container.with_network(network._network).with_network_aliases(alias)
        for inside, outside in (published or {}).items():
            self._container.ports[f"{inside}/tcp"] = ("127.0.0.1", outside)  # type: ignore[assignment]
        self.started = False
        self.paused = False
        self.connected = True

    def start(self) -> None:
        if not self.started:
            self._container.start()
            self.started = True
        else:
            self.docker().start()

    def docker(self) -> Any:
        return self._container.get_wrapped_container()

    def status(self) -> str:
        container = self.docker()
        container.reload()
        return str(container.status)

    def running(self) -> bool:
        return self.status() in ("running", "paused")

    # --- faults ----------------------------------------------------------------------------

    def kill(self) -> None:
        """SIGKILL to the whole container: a hard crash."""
        progress(f"kill -9 {self.alias}")
        self.docker().kill(signal="SIGKILL")
        self._wait_exited(30)

    def stop(self, timeout: int = 60) -> None:
        """SIGTERM and wait for a clean exit (SIGKILL after ``timeout`` seconds)."""
        progress(f"stop (SIGTERM) {self.alias}")
        self.docker().stop(timeout=timeout)
        self._wait_exited(timeout + 10)

    def restart(self) -> None:
        """Start a stopped or killed container again (same filesystem, same ports)."""
        progress(f"start {self.alias}")
        self.docker().start()

    def pause(self) -> None:
        """Freeze every process of the container (cgroup freezer): a long GC pause."""
        progress(f"pause {self.alias}")
        self.docker().pause()
        self.paused = True

    def unpause(self) -> None:
        progress(f"unpause {self.alias}")
        self.docker().unpause()
        self.paused = False

    def disconnect(self) -> None:
        """Cut the container off the network: no node and not the test process reach it."""
        progress(f"disconnect {self.alias}")
        self.network.docker_network().disconnect(self.container_name, force=True)
        self.connected = False

    def reconnect(self) -> None:
        progress(f"reconnect {self.alias}")
        self.network.docker_network().connect(self.container_name, aliases=[self.alias])
        self.connected = True

    def ip_address(self) -> str:
        """The container's address on the suite's network."""
        container = self.docker()
        container.reload()
        return str(container.attrs["NetworkSettings"]["Networks"][self.network.name]["IPAddress"])

    def isolate_from(self, addresses: list[str]) -> None:
        """Drop every packet between this container and ``addresses`` (needs NET_ADMIN):
        a network partition that, unlike ``disconnect``, leaves the test process (reaching
        the container through the network's gateway) on this container's side."""
        progress(f"partition {self.alias} from {', '.join(addresses)}")
        for address in addresses:
            self.exec(["iptables", "-I", "INPUT", "-s", address, "-j", "DROP"])
            self.exec(["iptables", "-I", "OUTPUT", "-d", address, "-j", "DROP"])

    def heal(self, addresses: list[str]) -> None:
        progress(f"heal the partition of {self.alias}")
        for address in addresses:
            self.exec(["iptables", "-D", "INPUT", "-s", address, "-j", "DROP"])
            self.exec(["iptables", "-D", "OUTPUT", "-d", address, "-j", "DROP"])

    def block_port(self, port: int) -> None:
        """Drop this container's outgoing TCP traffic to ``port`` (needs NET_ADMIN)."""
        self.exec(["iptables", "-I", "OUTPUT", "-p", "tcp", "--dport", str(port), "-j", "DROP"])

    def unblock_port(self, port: int) -> None:
        self.exec(["iptables", "-D", "OUTPUT", "-p", "tcp", "--dport", str(port), "-j", "DROP"])

    def exec(self, command: list[str]) -> str:
        exit_code, output = self.docker().exec_run(command)
        text = output.decode("utf-8", errors="replace")
        if exit_code != 0:
            raise RuntimeError(f"{self.alias}: {command} exited {exit_code}: {text}")
        return str(text)

    def logs(self, tail: int | None = 60) -> str:
        """The last ``tail`` lines of the container's output (None: all of it)."""
        try:
            output = self.docker().logs(tail="all" if tail is None else tail)
            return str(output.decode("utf-8", errors="replace"))
        except docker.errors.APIError as exc:
            return f"<no logs: {exc}>"

    def _wait_exited(self, timeout: float) -> None:
        wait_until(lambda: self.status() == "exited", timeout, f"{self.alias} to exit")

    def close(self) -> None:
        """Remove the container whatever state it is in."""
        if not self.started:
            return
        with contextlib.suppress(docker.errors.APIError):
            if self.paused or self.status() == "paused":
                self.docker().unpause()
        with contextlib.suppress(docker.errors.NotFound):
            self._container.stop(force=True, delete_volume=True)
        self.started = False


class ZooKeeperNode(Node):
    """One ZooKeeper server (QuorumPeerMain; standalone when the ensemble has one member)."""

    def __init__(self, image: str, network: SuiteNetwork, myid: int, ensemble_size: int,
                 tick_time_ms: int = 500) -> None:
        self.myid = myid
        self.client_port = free_port()
        lines = [
            f"tickTime={tick_time_ms}", "initLimit=20", "syncLimit=10",
            "dataDir=/var/lib/zookeeper-data", f"clientPort={ZK_CLIENT_PORT}",
            "maxClientCnxns=0", "admin.enableServer=false", "4lw.commands.whitelist=*",
            "autopurge.purgeInterval=0", "quorumListenOnAllIPs=true",
            "maxSessionTimeout=60000",
        ]
        if ensemble_size > 1:
            lines += [f"server.{n}=zk-{n}:2888:3888" for n in range(1, ensemble_size + 1)]
        config = "\\n".join(lines)
        script = (
            "mkdir -p /var/lib/zookeeper-data && "
            f"echo {myid} > /var/lib/zookeeper-data/myid && "
            f"printf '{config}\\n' > /etc/zoo-test.cfg && "
            f"exec java {ZK_JVM} -Dzookeeper.log.dir=/tmp -cp {ZK_CLASSPATH} "
            "org.apache.zookeeper.server.quorum.QuorumPeerMain /etc/zoo-test.cfg"
        )
        super().__init__(image, f"zk-{myid}", network, ["sh", "-c", script],
                         {ZK_CLIENT_PORT: self.client_port})

    @property
    def host_connect(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    def serving(self) -> bool:
        """``srvr`` answers with a mode (standalone, leader or follower)."""
        with socket.create_connection(("127.0.0.1", self.client_port), timeout=2) as sock:
            sock.sendall(b"srvr")
            answer = sock.recv(4096).decode("utf-8", errors="replace")
        return "Mode:" in answer

    def transaction_log(self) -> list[str]:
        """Every transaction this server logged, one line each (ZooKeeper's TxnLogToolkit)."""
        files = self.exec(["sh", "-c", "ls /var/lib/zookeeper-data/version-2/ | grep '^log\\.'"])
        lines: list[str] = []
        for name in sorted(files.split(), key=lambda n: int(n.split(".")[1], 16)):
            dump = self.exec([
                "java", "-Xmx128m", "-cp", ZK_CLASSPATH,
                "org.apache.zookeeper.server.persistence.TxnLogToolkit", "--dump",
                f"/var/lib/zookeeper-data/version-2/{name}",
            ])
            lines += dump.split("\n")  # payloads may hold other line breaks
        return lines


class BrokerNode(Node):
    """One kafkaclone broker, started through ``kafka-server-start.sh`` with overrides."""

    def __init__(self, image: str, network: SuiteNetwork, broker_id: int, zk_connect: str,
                 overrides: dict[str, str]) -> None:
        self.broker_id = broker_id
        self.external_port = free_port()
        alias = f"broker-{broker_id}"
        settings = {
            "broker.id": str(broker_id),
            "zookeeper.connect": zk_connect,
            "listeners": f"INTERNAL://0.0.0.0:{INTERNAL_PORT},EXTERNAL://0.0.0.0:{EXTERNAL_PORT}",
            "advertised.listeners": (f"INTERNAL://{alias}:{INTERNAL_PORT},"
                                     f"EXTERNAL://127.0.0.1:{self.external_port}"),
            "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "log.dirs": "/var/lib/kafkaclone/data",
            **overrides,
        }
        command = ["/opt/kafkaclone/scripts/kafka-server-start.sh",
                   "/opt/kafkaclone/config/server.properties"]
        for key, value in settings.items():
            command += ["--override", f"{key}={value}"]
        self.settings = settings
        super().__init__(image, alias, network, command, {EXTERNAL_PORT: self.external_port},
                         net_admin=True, env={"KAFKACLONE_LOG_LEVEL": BROKER_LOG_LEVEL})

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.external_port}"

    def log_digest(self, topic: str, partition: int) -> str:
        """sha256 of the partition's log segments on this broker, in offset order."""
        directory = f"{self.settings['log.dirs']}/{topic}-{partition}"
        return self.exec(["sh", "-c", f"cat $(ls {directory}/*.log | sort) | sha256sum"]
                         ).split()[0]

    def expire_zookeeper_session(self, session_timeout_s: float, zk: KazooClient,
                                 timeout: float = 60) -> None:
        """Make ZooKeeper expire this broker's session: drop its ZooKeeper traffic until its
        registration znode goes (the server expired the session), then let it through again;
        the broker finds its session expired when it reconnects."""
        progress(f"expire the ZooKeeper session of {self.alias}")
        path = f"/brokers/ids/{self.broker_id}"
        self.block_port(ZK_CLIENT_PORT)
        try:
            wait_until(lambda: zk.exists(path) is None, session_timeout_s + timeout,
                       f"{path} to go after its session expired")
        finally:
            self.unblock_port(ZK_CLIENT_PORT)


class ContainerCluster:
    """A ZooKeeper ensemble and N brokers on their own network. ``close()`` removes all.

    ``overrides`` go to every broker, ``broker_overrides[n]`` to broker n only (its
    ``broker.rack``, say)."""

    def __init__(self, image: str, num_brokers: int = 3, *, zk_nodes: int = 1,
                 overrides: dict[str, str] | None = None,
                 broker_overrides: dict[int, dict[str, str]] | None = None,
                 session_timeout_ms: int = 6000) -> None:
        self.image = image
        self.session_timeout_s = session_timeout_ms / 1000
        self.network = SuiteNetwork()
        self.zookeepers = [ZooKeeperNode(image, self.network, n, zk_nodes)
                           for n in range(1, zk_nodes + 1)]
        zk_connect = ",".join(f"zk-{n}:{ZK_CLIENT_PORT}" for n in range(1, zk_nodes + 1))
        settings = {
            "zookeeper.session.timeout.ms": str(session_timeout_ms),
            "zookeeper.connection.timeout.ms": "30000",
            "offsets.topic.replication.factor": str(min(3, num_brokers)),
            "num.partitions": "1",
            "default.replication.factor": str(min(3, num_brokers)),
            "replica.lag.time.max.ms": "10000",
            **(overrides or {}),
        }
        self.brokers = {
            n: BrokerNode(image, self.network, n, zk_connect,
                          {**settings, **(broker_overrides or {}).get(n, {})})
            for n in range(1, num_brokers + 1)}
        # Other containers on the cluster's network (Spark's, say), removed with it.
        self.extra_nodes: list[Node] = []
        self._zk: KazooClient | None = None

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> ContainerCluster:
        try:
            progress(f"starting {len(self.zookeepers)} ZooKeeper and {len(self.brokers)} broker "
                     f"containers on network {self.network.name}")
            for node in self.zookeepers:
                node.start()
            for node in self.zookeepers:
                wait_until(node.serving, 90, f"{node.alias} to serve")
            for broker in self.brokers.values():
                broker.start()
            self.wait_for_brokers(list(self.brokers), timeout=120)
            wanted = sorted(self.brokers)
            for broker in self.brokers.values():
                wait_until(functools.partial(self._serves_metadata, broker, wanted), 120,
                           f"broker {broker.broker_id} to answer Metadata with the controller "
                           "and every broker")
            progress("cluster up: brokers " + ", ".join(
                f"{b.broker_id}@{b.bootstrap}" for b in self.brokers.values()))
        except BaseException:
            self.dump_logs()
            self.close()
            raise
        return self

    def close(self) -> None:
        if LOGS_DIR:
            self.save_logs(Path(LOGS_DIR))
        if self._zk is not None:
            with contextlib.suppress(Exception):
                self._zk.stop()
                self._zk.close()
            self._zk = None
        for node in [*self.extra_nodes, *self.brokers.values(), *self.zookeepers]:
            try:
                node.close()
            except Exception:
                logger.exception("removing %s", node.container_name)
        self.network.close()

    def __enter__(self) -> ContainerCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _started_nodes(self) -> list[Node]:
        return [node for node in [*self.zookeepers, *self.brokers.values(), *self.extra_nodes]
                if node.started]

    def save_logs(self, directory: Path) -> None:
        """Every started node's whole log, as ``<network>-<alias>.log`` in ``directory``."""
        directory.mkdir(parents=True, exist_ok=True)
        for node in self._started_nodes():
            (directory / f"{self.network.name}-{node.alias}.log").write_text(
                node.logs(tail=None))

    def dump_logs(self, tail: int = 40) -> None:
        for node in self._started_nodes():
            progress(f"--- last log lines of {node.alias} ---\n{node.logs(tail)}")

    # --- ZooKeeper view from the test process ----------------------------------------------

    @property
    def zk_hosts(self) -> str:
        return ",".join(node.host_connect for node in self.zookeepers)

    @property
    def zk(self) -> KazooClient:
        """A kazoo client for the test process (blocking calls, test code only)."""
        if self._zk is None:
            client = KazooClient(hosts=self.zk_hosts, timeout=10.0)
            client.start(timeout=30)
            self._zk = client
        return self._zk

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(broker.bootstrap for broker in self.brokers.values())

    def bootstrap_except(self, *excluded: int) -> str:
        return ",".join(b.bootstrap for n, b in self.brokers.items() if n not in excluded)

    def registered_brokers(self) -> list[int]:
        return sorted(int(child) for child in self.zk.get_children("/brokers/ids"))

    def wait_for_brokers(self, broker_ids: list[int], timeout: float = 90) -> None:
        wanted = sorted(broker_ids)
        wait_until(lambda: all(n in self.registered_brokers() for n in wanted), timeout,
                   f"brokers {wanted} to register in ZooKeeper")

    @staticmethod
    def _serves_metadata(broker: BrokerNode, registered: list[int]) -> bool:
        """Whether the broker's metadata cache knows the controller and every broker yet.
        Between its registration and the controller's first UpdateMetadata a broker
        answers Metadata with controller id -1 (Kafka 2.8 too), and librdkafka's admin
        client, having asked once, waits for a connection state change before asking
        again: its CreateTopics then gives up "waiting for controller" after 30 s. A
        started cluster is one whose brokers answer Metadata fully (as LocalCluster's)."""
        request_cls = APIS[ApiKey.METADATA].request
        body = request_cls(topics=[], allow_auto_topic_creation=False,
                           include_cluster_authorized_operations=False,
                           include_topic_authorized_operations=False)
        host, port = broker.bootstrap.rsplit(":", 1)
        try:
            with BrokerConnection(host, int(port), request_timeout_ms=5_000) as conn:
                _, response = conn.request(ApiKey.METADATA, body, max_version=9)
        except (OSError, KafkaError):
            return False
        known = {b.node_id for b in response.brokers}
        return bool(response.controller_id >= 0 and all(b in known for b in registered))

    def broker_registration(self, broker_id: int) -> dict[str, Any]:
        data, stat = self.zk.get(f"/brokers/ids/{broker_id}")
        registration: dict[str, Any] = json.loads(data)
        registration["czxid"] = stat.czxid  # the broker epoch
        return registration

    def transactions(self) -> list[zktxn.Txn]:
        """Every ZooKeeper transaction so far, merged from the logs of the members that run."""
        return zktxn.merge(*(zktxn.parse(node.transaction_log())
                             for node in self.zookeepers if node.status() == "running"))

    def peer_addresses(self, node: Node) -> list[str]:
        """The addresses of every other node of the cluster (ZooKeeper and brokers)."""
        return [other.ip_address() for other in [*self.zookeepers, *self.brokers.values()]
                if other is not node]

    def wait_for_deregistration(self, broker_id: int, timeout: float | None = None) -> None:
        """Wait until ZooKeeper dropped the broker's registration (its session ended)."""
        wait_until(lambda: self.zk.exists(f"/brokers/ids/{broker_id}") is None,
                   timeout or self.session_timeout_s + 20,
                   f"/brokers/ids/{broker_id} to go")

    def controller(self) -> int:
        data, _ = self.zk.get("/controller")
        return int(json.loads(data)["brokerid"])

    def controller_epoch(self) -> int:
        data, _ = self.zk.get("/controller_epoch")
        return int(data)

    def partition_state(self, topic: str, partition: int) -> dict[str, Any]:
        data, stat = self.zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        state: dict[str, Any] = json.loads(data)
        state["zk_version"] = stat.version
        return state

    def replica_assignment(self, topic: str) -> dict[int, list[int]]:
        """The replicas of each partition of ``topic``, as /brokers/topics/<topic> holds."""
        data = json.loads(self.zk.get(f"/brokers/topics/{topic}")[0])
        return {int(p): list(replicas) for p, replicas in data["partitions"].items()}

    def leader(self, topic: str, partition: int) -> int:
        return int(self.partition_state(topic, partition)["leader"])

    def wait_for_leader(self, topic: str, partition: int, timeout: float = 60,
                        exclude: tuple[int, ...] = ()) -> int:
        def elected() -> int:
            leader = self.leader(topic, partition)
            return leader if leader >= 0 and leader not in exclude else 0
        return wait_until(elected, timeout, f"a leader for {topic}-{partition}")

    def replica_digests(self, topic: str, partition: int) -> dict[int, str]:
        """sha256 of each replica's log segments (concatenated in offset order), per broker
        holding the partition."""
        replicas = json.loads(self.zk.get(f"/brokers/topics/{topic}")[0])["partitions"]
        return {broker_id: self.brokers[broker_id].log_digest(topic, partition)
                for broker_id in replicas[str(partition)]}

    def wait_for_identical_replicas(self, topic: str, partition: int,
                                    timeout: float = 60) -> str:
        """Wait until every replica of the partition holds the same log bytes."""
        def identical() -> str:
            digests = self.replica_digests(topic, partition)
            return next(iter(digests.values())) if len(set(digests.values())) == 1 else ""
        try:
            return wait_until(identical, timeout,
                              f"the replicas of {topic}-{partition} to be identical")
        except TimeoutError as exc:
            raise AssertionError(f"{exc}: {self.replica_digests(topic, partition)}") from None

    def wait_for_isr(self, topic: str, partition: int, size: int, timeout: float = 90) -> None:
        wait_until(lambda: len(self.partition_state(topic, partition)["isr"]) >= size, timeout,
                   f"{topic}-{partition} to have {size} in-sync replicas")


@contextlib.contextmanager
def running_cluster(image: str, num_brokers: int = 3, **kwargs: Any) -> Iterator[ContainerCluster]:
    cluster = ContainerCluster(image, num_brokers, **kwargs)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.close()
