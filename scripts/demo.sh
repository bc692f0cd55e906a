#!/usr/bin/env bash
# The main job: installs what it needs, then runs the kafkaclone demo on this machine.
#   bash scripts/demo.sh          # stop the cluster afterwards with: bash scripts/cluster-down.sh
#
# 1. installs the Debian packages (ZooKeeper, kcat) and the Python venv (.venv);
# 2. brings up ZooKeeper on 127.0.0.1:2181 and three brokers on 127.0.0.1:9092-9094
#    (scripts/cluster-up.sh; data under .cluster/, git-ignored);
# 3. creates the topic "demo" (6 partitions, replication factor 3) and describes it;
# 4. lists the cluster as librdkafka sees it (kcat -L).
# Safe to run again: a running cluster and an existing topic are reused.
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"

export KAFKACLONE_APT_PACKAGES="zookeeper kcat"
export KAFKACLONE_EXTRAS=""
bash scripts/setup-env.sh

bootstrap=127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094
step() { printf '\n== %s\n' "$*"; }

step "ZooKeeper and three brokers"
bash scripts/cluster-up.sh

step "The demo topic"
scripts/kafka-topics.sh --bootstrap-server "$bootstrap" --create --if-not-exists \
    --topic demo --partitions 6 --replication-factor 3
scripts/kafka-topics.sh --bootstrap-server "$bootstrap" --describe --topic demo

step "The cluster as librdkafka sees it (kcat -L)"
kcat -L -b "$bootstrap" -t demo

printf '\nThe cluster keeps running; stop it with: bash scripts/cluster-down.sh\n'
