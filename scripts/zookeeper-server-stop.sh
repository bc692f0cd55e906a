#!/usr/bin/env bash
# Stops the ZooKeeper started with zookeeper-server-start.sh -daemon (its pid file in
# $LOG_DIR, default logs/); never signals any other process.
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python="$repo_root/.venv/bin/python"
[ -x "$python" ] || python=python3
exec "$python" -m kafkaclone.tools.zookeeper_tools stop "$@"
