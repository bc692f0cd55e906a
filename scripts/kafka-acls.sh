#!/usr/bin/env bash
# Apache Kafka's bin/kafka-acls.sh, over kafkaclone.tools.acl_command (same flags and output; --bootstrap-server only).
# Runs from any shell and directory: it finds the repository's .venv next to this script.
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python="$repo_root/.venv/bin/python"
[ -x "$python" ] || python=python3
exec "$python" -m kafkaclone.tools.acl_command "$@"
