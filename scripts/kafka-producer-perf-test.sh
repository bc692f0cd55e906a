#!/usr/bin/env bash
# Apache Kafka's bin/kafka-producer-perf-test.sh, over kafkaclone.tools.producer_perf (ProducerPerformance: same flags and output lines).
# Runs from any shell and directory: it finds the repository's .venv next to this script.
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python="$repo_root/.venv/bin/python"
[ -x "$python" ] || python=python3
exec "$python" -m kafkaclone.tools.producer_perf "$@"
