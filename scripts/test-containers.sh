#!/usr/bin/env bash
# The container test suite (testcontainers_tests/): ZooKeeper and the brokers as containers,
# broken on purpose, checked with kafkaclone.testing.history.
#   bash scripts/test-containers.sh [pytest args...]
# Installs docker.io and debootstrap (apt), starts a Docker engine when none answers (and
# stops it again at the end), builds the test image (cached by content hash), then runs
# pytest on testcontainers_tests with a line of progress per step.
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"
started=$(date +%s)

# The same extras as scripts/test.sh, so that after it this installs nothing.
export KAFKACLONE_APT_PACKAGES="docker.io debootstrap"
export KAFKACLONE_EXTRAS="${KAFKACLONE_EXTRAS-test,dev,spark}"
bash scripts/setup-env.sh

# No Ryuk reaper (it would be pulled from a registry): the fixtures remove what they create.
export TESTCONTAINERS_RYUK_DISABLED=true

dockerd_pid=""
stop_dockerd() {
    if [ -n "$dockerd_pid" ] && kill -0 "$dockerd_pid" 2>/dev/null; then
        echo "== stopping the Docker engine this script started (pid $dockerd_pid)"
        kill "$dockerd_pid"
        for _ in $(seq 1 30); do
            kill -0 "$dockerd_pid" 2>/dev/null || break
            sleep 1
        done
    fi
}
if ! docker info >/dev/null 2>&1; then
    echo "== starting dockerd (log: /tmp/kafkaclone-dockerd.log)"
    nohup dockerd >/tmp/kafkaclone-dockerd.log 2>&1 &
    dockerd_pid=$!
    trap stop_dockerd EXIT
    for _ in $(seq 1 60); do
        docker info >/dev/null 2>&1 && break
        kill -0 "$dockerd_pid" 2>/dev/null || { tail -n 20 /tmp/kafkaclone-dockerd.log; exit 1; }
        sleep 1
    done
    docker info >/dev/null 2>&1 || { echo "dockerd did not answer within 60s" >&2; exit 1; }
fi

echo "== building the test image"
bash scripts/build-test-image.sh

echo "== pytest testcontainers_tests"
status=0
.venv/bin/python -m pytest testcontainers_tests -v "$@" || status=$?
echo "== container suite finished in $(( $(date +%s) - started ))s (exit $status)"
exit $status
