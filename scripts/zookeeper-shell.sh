#!/usr/bin/env bash
# ZooKeeper's own command-line client, like Apache Kafka's bin/zookeeper-shell.sh:
#   scripts/zookeeper-shell.sh 127.0.0.1:2181 ls /brokers/ids
#   scripts/zookeeper-shell.sh 127.0.0.1:2181 get /brokers/ids/1
#   scripts/zookeeper-shell.sh 127.0.0.1:2181        (interactive)
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python="$repo_root/.venv/bin/python"
[ -x "$python" ] || python=python3
exec "$python" -m kafkaclone.tools.zookeeper_tools shell "$@"
