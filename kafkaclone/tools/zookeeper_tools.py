"""The ZooKeeper scripts: start/stop the real Apache ZooKeeper, its shell, and a wait.

``scripts/zookeeper-server-start.sh [-daemon] config/zookeeper.properties`` runs ZooKeeper's
own ``ZooKeeperServerMain`` on the JRE with that file (Debian's ``zookeeper`` package, or
``ZOOKEEPER_HOME`` / ``ZOOKEEPER_CLASSPATH``: the discovery of
``kafkaclone.tools.zookeeper_install``, which the tests' ZooKeeperServer shares).
``-daemon`` puts its output in ``$LOG_DIR/zookeeper.out`` and its pid in
``$LOG_DIR/zookeeper.pid`` (``LOG_DIR`` defaults to ``logs/``).

``scripts/zookeeper-server-stop.sh`` sends SIGTERM to the ZooKeeper whose pid file is in
``$LOG_DIR`` (only if that process is a ZooKeeper server).

``scripts/zookeeper-shell.sh host:port[/chroot] [command args]`` is ZooKeeper's own
``ZooKeeperMain`` (``ls``, ``get``, ``stat`` ...), as Kafka's zookeeper-shell.sh.

``python -m kafkaclone.tools.zookeeper_tools wait-brokers host:port N [timeout]`` waits
until N brokers are registered under ``/brokers/ids`` (for scripts).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from kafkaclone.tools.server_start import log_dir
from kafkaclone.tools.zookeeper_install import (
    DEFAULT_JVM_FLAGS,
    MAIN_CLASS,
    ZooKeeperNotFoundError,
    find_classpath,
    find_java,
)

SHELL_CLASS = "org.apache.zookeeper.ZooKeeperMain"
PID_FILE = "zookeeper.pid"


def process_command_line(pid: int) -> str:
    """The process's command line ("" if it does not exist)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace")
    except OSError:
        return ""


def read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None


def running_pid(pid_file: Path, marker: str) -> int | None:
    """The pid in ``pid_file`` if that process runs and its command line has ``marker``."""
    pid = read_pid(pid_file)
    if pid is not None and marker in process_command_line(pid):
        return pid
    return None


def server_command(config: str) -> list[str]:
    return [find_java(), *DEFAULT_JVM_FLAGS, "-cp", find_classpath(), MAIN_CLASS, config]


def start(argv: list[str]) -> int:
    daemon = bool(argv) and argv[0] in ("-daemon", "--daemon")
    args = argv[1:] if daemon else argv
    if len(args) != 1:
        print("USAGE: zookeeper-server-start.sh [-daemon] zookeeper.properties", file=sys.stderr)
        return 1
    config = args[0]
    if not Path(config).is_file():
        print(f"zookeeper-server-start.sh: no such file: {config}", file=sys.stderr)
        return 1
    try:
        command = server_command(os.path.abspath(config))
    except ZooKeeperNotFoundError as exc:
        print(exc, file=sys.stderr)
        return 1
    if not daemon:
        os.execv(command[0], command)
    directory = log_dir()
    pid_file = directory / PID_FILE
    pid = running_pid(pid_file, MAIN_CLASS)
    if pid is not None:
        print(f"ZooKeeper is already running (pid {pid})")
        return 0
    with open(directory / "zookeeper.out", "ab") as out:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    pid_file.write_text(f"{process.pid}\n")
    print(f"ZooKeeper started in the background, pid {process.pid}, "
          f"log {directory / 'zookeeper.out'}")
    return 0


def stop(argv: list[str]) -> int:
    pid_file = log_dir() / PID_FILE
    pid = running_pid(pid_file, MAIN_CLASS)
    if pid is None:
        print("No zookeeper server to stop")
        pid_file.unlink(missing_ok=True)
        return 1
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and running_pid(pid_file, MAIN_CLASS) is not None:
        time.sleep(0.1)
    pid_file.unlink(missing_ok=True)
    return 0


def shell(argv: list[str]) -> int:
    if not argv:
        print("USAGE: zookeeper-shell.sh zookeeper_host:port[/path] [args...]", file=sys.stderr)
        return 1
    try:
        command = [find_java(), "-Xmx256m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=off",
                   "-cp", find_classpath(), SHELL_CLASS,
                   "-server", argv[0], *argv[1:]]
    except ZooKeeperNotFoundError as exc:
        print(exc, file=sys.stderr)
        return 1
    os.execv(command[0], command)


def wait_brokers(argv: list[str]) -> int:
    from kazoo.client import KazooClient

    if len(argv) not in (2, 3):
        print("USAGE: wait-brokers host:port[/chroot] count [timeout_seconds]", file=sys.stderr)
        return 1
    connect, count = argv[0], int(argv[1])
    timeout = float(argv[2]) if len(argv) == 3 else 60.0
    client = KazooClient(hosts=connect, timeout=10.0)
    deadline = time.monotonic() + timeout
    try:
        client.start(timeout=min(timeout, 15.0))
        while True:
            ids = client.get_children("/brokers/ids") if client.exists("/brokers/ids") else []
            if len(ids) >= count:
                print(f"brokers registered: {','.join(sorted(ids, key=int))}")
                return 0
            if time.monotonic() > deadline:
                print(f"only {len(ids)} of {count} brokers registered after {timeout:.0f}s",
                      file=sys.stderr)
                return 1
            time.sleep(0.2)
    finally:
        client.stop()
        client.close()


COMMANDS = {"start": start, "stop": stop, "shell": shell, "wait-brokers": wait_brokers}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        print(f"USAGE: zookeeper_tools {{{'|'.join(COMMANDS)}}} ...", file=sys.stderr)
        return 1
    return COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main())
