#!/usr/bin/env bash
# Apache Kafka's bin/connect-distributed.sh, over kafkaclone.connect.distributed:
#   connect-distributed.sh worker.properties
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python="$repo_root/.venv/bin/python"
[ -x "$python" ] || python=python3
exec "$python" -m kafkaclone.connect.distributed "$@"
