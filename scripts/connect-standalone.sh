#!/usr/bin/env bash
# Apache Kafka's bin/connect-standalone.sh, over kafkaclone.connect.standalone:
#   connect-standalone.sh worker.properties connector1.properties [connector2.properties ...]
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python="$repo_root/.venv/bin/python"
[ -x "$python" ] || python=python3
exec "$python" -m kafkaclone.connect.standalone "$@"
