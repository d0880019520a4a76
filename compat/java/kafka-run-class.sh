#!/usr/bin/env bash
# kafka-run-class.sh CLASS [ARGS...] runs one of Kafka's classes (a tool
# such as org.apache.kafka.tools.TopicCommand, or kafka.Kafka itself) on
# the classpath of pom.xml, as bin/kafka-run-class.sh does in a Kafka
# installation. KAFKA_HEAP_OPTS and KAFKA_OPTS are passed to java.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cp=$("$here/classpath.sh")
# shellcheck disable=SC2086
exec java ${KAFKA_HEAP_OPTS:--Xmx256m} ${KAFKA_OPTS:-} -cp "$cp" "$@"
