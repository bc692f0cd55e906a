#!/usr/bin/env bash
# Runs the real Apache ZooKeeper (Debian's zookeeper package) with a config file, like
# Apache Kafka's bin/zookeeper-server-start.sh:
#   scripts/zookeeper-server-start.sh [-daemon] config/zookeeper.properties
# -daemon runs it in the background (output and pid file in $LOG_DIR, default logs/).
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python="$repo_root/.venv/bin/python"
[ -x "$python" ] || python=python3
exec "$python" -m kafkaclone.tools.zookeeper_tools start "$@"
