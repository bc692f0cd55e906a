#!/usr/bin/env bash
# The main job: installs what it needs, then runs the kafkaclone demo on this machine.
#   bash scripts/demo.sh          # stop the cluster afterwards with: bash scripts/cluster-down.sh
#
# 1. installs the Debian packages (ZooKeeper, kcat) and the Python venv (.venv);
# 2. brings up ZooKeeper on 127.0.0.1:2181 and three brokers on 127.0.0.1:9092-9094
#    (scripts/cluster-up.sh; data under .cluster/, git-ignored), each serving Prometheus
#    metrics on http://127.0.0.1:7071-7073/metrics;
# 3. creates the topic "demo" (6 partitions, replication factor 3) and describes it;
# 4. lists the cluster as librdkafka sees it (kcat -L);
# 5. produces 10,000 keyed lines with kafka-console-producer.sh (acks=all), consumes them in
#    the group demo-group with kafka-console-consumer.sh, counts them again with kcat (a
#    client nobody here wrote) and shows the group's offsets with kafka-consumer-groups.sh;
# 6. runs the Spark job (kafkaclone.tools.spark_demo): 200,000 JSON monitoring events are
#    produced, read back in parallel by the kafkaclone Spark source, filtered, grouped per
#    host and minute and written to another topic, as a batch job and as a streaming query;
#    it prints the read rates and the result table.
# Safe to run again: a running cluster and existing topics are reused (the counts then
# include the earlier runs' records where noted).
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"

export KAFKACLONE_APT_PACKAGES="zookeeper kcat"
export KAFKACLONE_EXTRAS="spark"
bash scripts/setup-env.sh

bootstrap=127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094
step() { printf '\n== %s\n' "$*"; }

step "ZooKeeper and three brokers"
KAFKACLONE_METRICS_BASE_PORT=7070 bash scripts/cluster-up.sh

step "The demo topic"
scripts/kafka-topics.sh --bootstrap-server "$bootstrap" --create --if-not-exists \
    --topic demo --partitions 6 --replication-factor 3
# On a second run the brokers restart from their logs: followers catch up and rejoin the
# ISR, then the preferred replicas take their leadership back, as an operator would do
# after a restart (auto.leader.rebalance.enable does it too, after leader.imbalance.check.interval.seconds).
for _ in $(seq 1 60); do
    [ -z "$(scripts/kafka-topics.sh --bootstrap-server "$bootstrap" --describe --topic demo \
        --under-replicated-partitions)" ] && break
    sleep 1
done
scripts/kafka-leader-election.sh --bootstrap-server "$bootstrap" --election-type PREFERRED \
    --all-topic-partitions || true
scripts/kafka-topics.sh --bootstrap-server "$bootstrap" --describe --topic demo

step "The cluster as librdkafka sees it (kcat -L)"
kcat -L -b "$bootstrap" -t demo

step "Produce 10,000 keyed records (kafka-console-producer.sh, acks=all)"
run_id=$(date +%s)
seq 1 10000 | awk -v run="$run_id" '{ printf "user-%d:event %d of run %s\n", $1 % 50, $1, run }' |
    scripts/kafka-console-producer.sh --bootstrap-server "$bootstrap" --topic demo \
        --property parse.key=true --property key.separator=: --request-required-acks all
scripts/kafka-get-offsets.sh --bootstrap-server "$bootstrap" --topic demo

step "Consume them in the group demo-group (kafka-console-consumer.sh)"
scripts/kafka-console-consumer.sh --bootstrap-server "$bootstrap" --topic demo \
    --group demo-group --from-beginning --max-messages 10000 --timeout-ms 30000 \
    --property print.key=true --property print.partition=true --property print.offset=true |
    tail -n 3

step "The group's committed offsets and lag (kafka-consumer-groups.sh)"
scripts/kafka-consumer-groups.sh --bootstrap-server "$bootstrap" --describe --group demo-group

step "Everything in the topic, counted by kcat (librdkafka)"
kcat -C -b "$bootstrap" -t demo -o beginning -e -q | wc -l

step "The Spark job: monitoring events -> filter -> count per host and minute -> topic"
for topic in demo-events demo-problem-counts demo-problem-counts-streaming; do
    scripts/kafka-topics.sh --bootstrap-server "$bootstrap" --create --if-not-exists \
        --topic "$topic" --partitions 4 --replication-factor 3
done
.venv/bin/python -m kafkaclone.tools.spark_demo --bootstrap-server "$bootstrap" \
    --produce 200000

step "Metrics (Prometheus text, names after Kafka's JMX names; docs/operations.md)"
for id in 1 2 3; do
    url="http://127.0.0.1:$((7070 + id))/metrics"
    echo "broker $id: $url"
    .venv/bin/python - "$url" <<'PY' || echo "  (not served: a broker started before metrics were on; restart the cluster)"
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

text = urllib.request.urlopen(sys.argv[1], timeout=5).read().decode()
shown = ("kafka_controller_kafkacontroller_activecontrollercount",
         "kafka_server_replicamanager_underreplicatedpartitions",
         "kafka_server_replicamanager_leadercount",
         "kafka_server_brokertopicmetrics_messagesin_total")
for family in text_string_to_metric_families(text):
    for sample in family.samples:
        if sample.name in shown:
            print(f"  {sample.name} {sample.value:g}")
PY
done

printf '\nThe cluster keeps running; stop it with: bash scripts/cluster-down.sh\n'
printf 'Metrics: http://127.0.0.1:7071/metrics, :7072/metrics, :7073/metrics\n'
