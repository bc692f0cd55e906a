#!/usr/bin/env bash
# The test command: installs everything the tests need, then runs the linters, the suite and
# the container suite (scripts/test-containers.sh).
#   bash scripts/test.sh [pytest args...]
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"

# kcat: a real client the golden-frame tests capture live, beside confluent-kafka and
# kafka-python; zookeeper: the real server (on the JRE it pulls in) the ZooKeeper tests start;
# postgresql: the real database the JDBC connector tests start (initdb + postgres, temp dir).
export KAFKACLONE_APT_PACKAGES="kcat zookeeper postgresql"
export KAFKACLONE_EXTRAS="test,dev,spark"
bash scripts/setup-env.sh

py="$repo_root/.venv/bin"
echo "== ruff"
"$py/ruff" check kafkaclone tests benchmarks testcontainers_tests
echo "== mypy"
"$py/mypy"
echo "== layer rule (import-linter, pyproject.toml)"
"$py/lint-imports"
echo "== pytest"
"$py/python" -m pytest "$@"
# After the fast tests: the cluster as containers, broken on purpose (issue 9).
echo "== container suite"
bash scripts/test-containers.sh
