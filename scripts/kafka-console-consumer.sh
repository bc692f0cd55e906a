#!/usr/bin/env bash
# Apache Kafka's bin/kafka-console-consumer.sh, over kafkaclone.tools.console_consumer (same flags and output).
# Runs from any shell and directory: it finds the repository's .venv next to this script.
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python="$repo_root/.venv/bin/python"
[ -x "$python" ] || python=python3
exec "$python" -m kafkaclone.tools.console_consumer "$@"
