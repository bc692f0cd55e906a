#!/usr/bin/env bash
# The main job: installs what it needs, then runs the kafkaclone demo.
#   bash scripts/demo.sh
# Today the broker is not built yet (see README "Status"), so the demo checks the protocol
# layer on this machine and prints the compatibility matrix; it grows into the ZooKeeper +
# 3-broker cluster, demo topic, produce, consume and Spark job as those parts land.
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"

export KAFKACLONE_APT_PACKAGES=""
export KAFKACLONE_EXTRAS=""
bash scripts/setup-env.sh

"$repo_root/.venv/bin/python" -m kafkaclone.tools.protocol_check
