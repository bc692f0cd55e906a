#!/usr/bin/env bash
# Stops the local cluster of scripts/cluster-up.sh: the brokers one at a time (each a clean,
# controlled shutdown, so leadership moves to the brokers still up), then ZooKeeper. The
# data under .cluster/ is kept (rm -rf .cluster to start afresh). Only the processes named
# by the pid files in .cluster/logs are signalled.
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export LOG_DIR="$repo_root/.cluster/logs"
for pid_file in $(ls -r "$LOG_DIR"/kafka-server-*.pid 2>/dev/null); do
    pid=$(tr -dc '0-9' <"$pid_file")
    if [ -n "$pid" ] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" |
        grep -q "kafkaclone.tools.server_start"; then
        echo "Stopping broker $(basename "$pid_file" .pid | sed 's/kafka-server-//') (pid $pid)"
        kill -TERM "$pid"
        for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then
            echo "broker pid $pid did not stop within 60s" >&2
            exit 1
        fi
    fi
    rm -f "$pid_file"
done
"$repo_root/scripts/zookeeper-server-stop.sh" || true
echo "Cluster down"
