"""Run a broker: ``scripts/kafka-server-start.sh [-daemon] server.properties [--override k=v]``.

As Kafka's ``kafka.Kafka``: the properties file, with ``--override key=value`` on top. A bad
configuration, a broker.id already registered, a cluster id that does not match
``meta.properties``: one line on stderr and exit status 1. SIGTERM (or ^C) shuts the broker
down cleanly (controlled shutdown first) and exits 0.

``-daemon`` validates the configuration, then starts the broker in the background with its
output in ``$LOG_DIR/kafkaServer-<broker.id>.out`` (``LOG_DIR`` defaults to ``logs/`` in the
checkout) and its pid in ``$LOG_DIR/kafka-server-<broker.id>.pid``, which
``kafka-server-stop.sh`` reads. The broker removes its pid file when it exits.
"""

from __future__ import annotations

import logging
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from kafkaclone.common.errors import InvalidConfigError
from kafkaclone.server.config import KafkaConfig

PID_FILE_ENV = "KAFKACLONE_PID_FILE"
REPO_ROOT = Path(__file__).resolve().parents[2]
USAGE = "USAGE: kafka-server-start.sh [-daemon] server.properties [--override property=value]*"


def log_dir() -> Path:
    """``$LOG_DIR``, else ``logs/`` in the checkout (created, and git-ignored)."""
    directory = Path(os.environ.get("LOG_DIR") or REPO_ROOT / "logs")
    directory.mkdir(parents=True, exist_ok=True)
    ignore = directory / ".gitignore"
    if not ignore.exists() and directory.resolve().is_relative_to(REPO_ROOT):
        ignore.write_text("*\n")
    return directory


def parse_args(argv: list[str]) -> tuple[bool, str, list[str]]:
    """(daemon, properties file, overrides). ValueError with the usage line."""
    args = list(argv)
    daemon = False
    if args and args[0] in ("-daemon", "--daemon"):
        daemon = True
        args.pop(0)
    if not args or args[0].startswith("-"):
        raise ValueError(USAGE)
    properties, rest = args[0], args[1:]
    overrides: list[str] = []
    while rest:
        flag = rest.pop(0)
        if flag != "--override" or not rest:
            raise ValueError(USAGE)
        overrides.append(rest.pop(0))
    return daemon, properties, overrides


def parse_log_levels(spec: str) -> tuple[str, dict[str, str]]:
    """``KAFKACLONE_LOG_LEVEL``'s value: the root level, then optional ``logger=LEVEL``
    pairs, comma separated (``INFO,kafkaclone.coordinator.transaction=DEBUG``), like log4j's
    ``log4j.logger.*`` lines. ValueError names a part that is not a level."""
    root, *pairs = (part.strip() for part in spec.split(","))
    loggers: dict[str, str] = {}
    for pair in pairs:
        name, _, level = pair.partition("=")
        loggers[name.strip()] = level.strip().upper()
    root = root.upper() or "INFO"
    for level in (root, *loggers.values()):
        if not isinstance(logging.getLevelName(level), int):
            raise ValueError(f"KAFKACLONE_LOG_LEVEL: {level!r} is not a log level")
    return root, loggers


def configure_logging() -> None:
    root, loggers = parse_log_levels(os.environ.get("KAFKACLONE_LOG_LEVEL", "INFO"))
    logging.basicConfig(stream=sys.stdout, level=root,
                        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)")
    for name, level in loggers.items():
        logging.getLogger(name).setLevel(level)
    from twisted.python import log as twisted_log

    twisted_log.PythonLoggingObserver().start()  # type: ignore[no-untyped-call]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        daemon, properties, overrides = parse_args(argv)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 1
    try:
        config = KafkaConfig.from_properties_file(properties, overrides)
        parse_log_levels(os.environ.get("KAFKACLONE_LOG_LEVEL", "INFO"))
    except (InvalidConfigError, ValueError) as exc:
        print(exc, file=sys.stderr)
        return 1
    if daemon:
        return start_daemon(config, properties, overrides)
    return run_broker(config)


def start_daemon(config: KafkaConfig, properties: str, overrides: list[str]) -> int:
    directory = log_dir()
    name = f"{config.broker_id}" if config.broker_id >= 0 else "generated"
    pid_file = directory / f"kafka-server-{name}.pid"
    out_file = directory / f"kafkaServer-{name}.out"
    command = [sys.executable, "-m", "kafkaclone.tools.server_start", properties]
    for override in overrides:
        command += ["--override", override]
    with open(out_file, "ab") as out:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, env={**os.environ, PID_FILE_ENV: str(pid_file)})
    pid_file.write_text(f"{process.pid}\n")
    print(f"broker {name} started in the background, pid {process.pid}, log {out_file}")
    return 0


def raise_open_files_limit() -> None:
    """Raise the soft limit of open files to the hard one, as the JVM does for Kafka
    (``-XX:+MaxFDLimit``, on by default): a broker keeps each segment's file open, and the
    soft limit (often 1,024) is what fails first with thousands of partitions."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard and (hard == resource.RLIM_INFINITY or soft < hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (OSError, ValueError) as exc:
            logging.getLogger("kafkaclone.server").warning(
                "Could not raise the open files limit from %d to %d: %s", soft, hard, exc)
            return
    from kafkaclone.log.manager import open_files_limit

    limit = open_files_limit()
    logging.getLogger("kafkaclone.server").info(
        "Open files limit: %s", "unlimited" if limit is None else limit)


def run_broker(config: KafkaConfig) -> int:
    configure_logging()
    from twisted.internet import reactor

    from kafkaclone.server import heap
    from kafkaclone.server.broker import BrokerStartupError, KafkaBroker

    heap.enable()
    raise_open_files_limit()

    pid_file = os.environ.get(PID_FILE_ENV)
    the_reactor: Any = reactor
    broker = KafkaBroker(config, the_reactor)
    exit_code = [0]

    def failed(failure: Any) -> None:
        error = failure.value
        reason = str(error) if isinstance(error, BrokerStartupError) else (
            f"{type(error).__name__}: {error}")
        logging.getLogger("kafkaclone.server").error("Fatal error during KafkaServer "
                                                     "startup: %s", reason)
        print(reason.splitlines()[0] if reason else type(error).__name__, file=sys.stderr)
        exit_code[0] = 1
        stop_once()

    def start() -> None:
        broker.startService().addErrback(failed)

    stopping = [False]

    def stop_once() -> None:  # a second SIGTERM while shutting down changes nothing
        if not stopping[0]:
            stopping[0] = True
            the_reactor.stop()

    def on_signal(signum: int, frame: Any) -> None:
        logging.getLogger("kafkaclone.server").info(
            "Received %s, shutting down", signal.Signals(signum).name)
        the_reactor.callFromThread(stop_once)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    the_reactor.addSystemEventTrigger("before", "shutdown", broker.stopService)
    the_reactor.callWhenRunning(start)
    try:
        the_reactor.run(installSignalHandlers=False)
    finally:
        if pid_file:
            try:
                if Path(pid_file).read_text().strip() == str(os.getpid()):
                    Path(pid_file).unlink()
            except OSError:
                pass
    return exit_code[0]


if __name__ == "__main__":
    sys.exit(main())
