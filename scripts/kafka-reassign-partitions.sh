#!/usr/bin/env bash
# Apache Kafka's bin/kafka-reassign-partitions.sh, over kafkaclone.tools.reassign_partitions (same flags, same output).
# Runs from any shell and directory: it finds the repository's .venv next to this script.
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python="$repo_root/.venv/bin/python"
[ -x "$python" ] || python=python3
exec "$python" -m kafkaclone.tools.reassign_partitions "$@"
