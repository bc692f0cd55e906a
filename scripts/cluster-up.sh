#!/usr/bin/env bash
# Brings up a local cluster: ZooKeeper on 127.0.0.1:2181 and 3 brokers (ids 1-3) on
# 127.0.0.1:9092-9094, data and logs under .cluster/ in the checkout (git-ignored).
# Safe to run twice: what is already up is left alone. scripts/cluster-down.sh stops it.
# KAFKACLONE_METRICS_BASE_PORT=7070 turns metrics on: broker N serves Prometheus text on
# http://127.0.0.1:$((7070 + N))/metrics (metrics.prometheus.port).
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cluster="$repo_root/.cluster"
export LOG_DIR="$cluster/logs"
python="$repo_root/.venv/bin/python"
[ -x "$python" ] || python=python3
mkdir -p "$cluster/zookeeper" "$LOG_DIR"

is_running() { # pid_file marker
    local pid
    [ -f "$1" ] || return 1
    pid=$(tr -dc '0-9' <"$1" 2>/dev/null || true)
    [ -n "$pid" ] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q "$2"
}

if is_running "$LOG_DIR/zookeeper.pid" ZooKeeperServerMain; then
    echo "ZooKeeper is already up (pid $(cat "$LOG_DIR/zookeeper.pid")) on 127.0.0.1:2181"
else
    cat >"$cluster/zookeeper.properties" <<PROPS
dataDir=$cluster/zookeeper
clientPort=2181
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=*
PROPS
    "$repo_root/scripts/zookeeper-server-start.sh" -daemon "$cluster/zookeeper.properties"
    for _ in $(seq 300); do
        answer=$({ exec 3<>/dev/tcp/127.0.0.1/2181 && printf ruok >&3 && cat <&3; } 2>/dev/null || true)
        [ "$answer" = "imok" ] && break
        sleep 0.1
    done
    [ "$answer" = "imok" ] || { echo "ZooKeeper did not start; see $LOG_DIR/zookeeper.out" >&2; exit 1; }
fi

for id in 1 2 3; do
    port=$((9091 + id))
    metrics=()
    if [ -n "${KAFKACLONE_METRICS_BASE_PORT:-}" ]; then
        metrics=(--override "metrics.prometheus.port=$((KAFKACLONE_METRICS_BASE_PORT + id))")
    fi
    if is_running "$LOG_DIR/kafka-server-$id.pid" kafkaclone.tools.server_start; then
        echo "Broker $id is already up (pid $(cat "$LOG_DIR/kafka-server-$id.pid")) on 127.0.0.1:$port"
        continue
    fi
    "$repo_root/scripts/kafka-server-start.sh" -daemon "$repo_root/config/server.properties" \
        --override "broker.id=$id" \
        --override "listeners=PLAINTEXT://127.0.0.1:$port" \
        --override "log.dirs=$cluster/broker-$id" \
        --override "zookeeper.connect=127.0.0.1:2181" \
        --override "offsets.topic.replication.factor=3" "${metrics[@]}"
done

"$python" -m kafkaclone.tools.zookeeper_tools wait-brokers 127.0.0.1:2181 3 60
echo "Cluster up: bootstrap servers 127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094"
