#!/usr/bin/env bash
# Starts a broker, like Apache Kafka's bin/kafka-server-start.sh:
#   scripts/kafka-server-start.sh [-daemon] config/server.properties [--override property=value]*
# -daemon runs it in the background (output and pid file in $LOG_DIR, default logs/).
set -euo pipefail
if [ $# -lt 1 ]; then
    echo "USAGE: $0 [-daemon] server.properties [--override property=value]*" >&2
    exit 1
fi
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python="$repo_root/.venv/bin/python"
[ -x "$python" ] || python=python3
exec "$python" -m kafkaclone.tools.server_start "$@"
