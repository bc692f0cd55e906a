#!/usr/bin/env bash
# Dumps log segment files like Apache Kafka's bin/kafka-dump-log.sh (DumpLogSegments):
#   scripts/kafka-dump-log.sh --files 00000000000000000000.log[,00000000000000000000.index]
#       [--print-data-log] [--deep-iteration] [--index-sanity-check] [--verify-index-only]
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python="$repo_root/.venv/bin/python"
[ -x "$python" ] || python=python3
exec "$python" -m kafkaclone.tools.dump_log "$@"
