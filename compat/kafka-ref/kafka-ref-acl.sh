#!/usr/bin/env bash
# Starts one Kafka 4.4 node (combined mode) with a PLAINTEXT client
# listener (User:ANONYMOUS), a SASL_PLAINTEXT one (PLAIN: admin, alice,
# bob) that brokers also use, a SASL controller listener, and the
# StandardAuthorizer, for the broker package's TestAuthorizationMatrix
# (GREGOR_ACL_REFERENCE, the line it prints). Usage:
#   kafka-ref-acl.sh DIR true|false   (allow.everyone.if.no.acl.found)
# Stop it with kill "$(cat DIR/pid)".
set -euo pipefail
dir=$1; allow=$2
here=$(cd "$(dirname "$0")" && pwd)
java_dir="$here/../java"
cp=$("$java_dir/classpath.sh")
free() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
P=$(free); S=$(free); C=$(free)
rm -rf "$dir/data"; mkdir -p "$dir/data"
jaas_all='org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";'
cat > "$dir/server.properties" <<P
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$C
listeners=PLAINTEXT://127.0.0.1:$P,SASL_PLAINTEXT://127.0.0.1:$S,CONTROLLER://127.0.0.1:$C
advertised.listeners=PLAINTEXT://127.0.0.1:$P,SASL_PLAINTEXT://127.0.0.1:$S,CONTROLLER://127.0.0.1:$C
controller.listener.names=CONTROLLER
inter.broker.listener.name=SASL_PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT
sasl.enabled.mechanisms=PLAIN
sasl.mechanism.inter.broker.protocol=PLAIN
sasl.mechanism.controller.protocol=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config=$jaas_all
listener.name.controller.plain.sasl.jaas.config=$jaas_all
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:admin
allow.everyone.if.no.acl.found=$allow
log.dirs=$dir/data
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
P
java -Xmx256m -cp "$cp" kafka.tools.StorageTool format --config "$dir/server.properties" --cluster-id R3JlZ29yQUNMUmVmZXJlbmNl --standalone > "$dir/format.log" 2>&1
nohup java -Xmx384m -Dlog4j2.configurationFile="$here/log4j2.xml" -Dkafka.log.dir="$dir" -cp "$cp" kafka.Kafka "$dir/server.properties" > "$dir/stdout.log" 2>&1 &
echo $! > "$dir/pid"
for i in $(seq 1 120); do
	if grep -q "Kafka Server started" "$dir/server.log" 2>/dev/null; then
		echo "plain=127.0.0.1:$P,sasl=127.0.0.1:$S,allow=$allow"
		exit 0
	fi
	if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then echo "kafka exited" >&2; tail -30 "$dir/stdout.log" >&2; exit 1; fi
	sleep 1
done
echo "not started" >&2; tail -30 "$dir/stdout.log" >&2; exit 1
