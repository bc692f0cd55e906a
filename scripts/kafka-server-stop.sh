#!/usr/bin/env bash
# Stops the brokers started from this checkout with kafka-server-start.sh -daemon (SIGTERM:
# a clean, controlled shutdown), like Apache Kafka's bin/kafka-server-stop.sh. Only the
# processes named by the pid files in $LOG_DIR (if unset: logs/ and .cluster/logs) that are
# kafkaclone brokers are signalled; nothing else is.
#   scripts/kafka-server-stop.sh [--wait]     --wait: until they have exited (at most 60s)
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
wait_for_exit=false
[ "${1:-}" = "--wait" ] && wait_for_exit=true
pids=()
if [ -n "${LOG_DIR:-}" ]; then
    dirs=("$LOG_DIR")
else
    dirs=("$repo_root/logs" "$repo_root/.cluster/logs")
fi
for dir in "${dirs[@]}"; do
    for pid_file in "$dir"/kafka-server-*.pid; do
        [ -f "$pid_file" ] || continue
        pid=$(tr -dc '0-9' <"$pid_file")
        if [ -n "$pid" ] && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" |
            grep -q "kafkaclone.tools.server_start"; then
            kill -TERM "$pid" && pids+=("$pid")
        else
            rm -f "$pid_file"  # stale: that broker is gone
        fi
    done
done
if [ ${#pids[@]} -eq 0 ]; then
    echo "No kafka server to stop"
    exit 1
fi
echo "Stopping kafka server(s): ${pids[*]}"
if $wait_for_exit; then
    for _ in $(seq 600); do
        alive=0
        for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        [ $alive -eq 0 ] && exit 0
        sleep 0.1
    done
    echo "kafka server(s) still running after 60s: ${pids[*]}" >&2
    exit 1
fi
