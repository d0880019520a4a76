#!/usr/bin/env bash
# kafka-ref.sh runs Apache Kafka itself (the 4.4.0 jars pinned by
# compat/java/pom.xml) as the reference the compatibility suite compares
# Gregor with: KRaft in combined mode (every node is broker and
# controller), on free loopback ports, each node with its own data
# directory, formatted by Kafka's own StorageTool.
#
#   kafka-ref.sh start  [--nodes N] [--dir DIR] [--set name=value]... [--owner PID]
#   kafka-ref.sh stop   [--nodes N] [--dir DIR]
#   kafka-ref.sh status [--nodes N] [--dir DIR]
#   kafka-ref.sh kill   [--nodes N] [--dir DIR]
#   kafka-ref.sh resume [--nodes N] [--dir DIR]
#
# start writes each node's server.properties under DIR, formats its
# storage, starts the JVMs in the background, waits until every node
# logged "Kafka Server started" and answers an ApiVersions request, then
# prints the bootstrap address (host:port,...) on stdout; it is also kept
# in DIR/bootstrap. A reference that is already running is left as it is
# and its address printed; otherwise start begins from empty data (a
# reference run never inherits topics from an earlier one). --set
# overrides a broker property on every node (auto.create.topics.enable=
# false for the suite's second reference); --owner stops the nodes when
# that process exits, so a killed test run leaves no JVM behind.
#
# kill SIGKILLs every node (a crash: no clean shutdown) and keeps its data
# and configs; resume starts the nodes again on them, on the same ports,
# and waits until they serve again (a crash test's restart). The previous
# run's server.log is kept as server.log.N.
#
# DIR defaults to compat/out/kafka-ref/nodes-N. Node i's files are in
# DIR/node-i: server.properties, data/, server.log (log4j2.xml) and
# stdout.log (the JVM's own output). KAFKA_HEAP_OPTS overrides the heap
# (-Xmx512m for one node, -Xmx384m each for more: the machines are small).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
java_dir="$here/../java"

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//' >&2
	exit 2
}

cmd=${1:-}
[ -n "$cmd" ] || usage
shift
nodes=1
dir=""
owner=""
sets=()
while [ $# -gt 0 ]; do
	case "$1" in
	--nodes) nodes=$2; shift 2 ;;
	--dir) dir=$2; shift 2 ;;
	--set) sets+=("$2"); shift 2 ;;
	--owner) owner=$2; shift 2 ;;
	*) usage ;;
	esac
done
case "$nodes" in
'' | *[!0-9]* | 0) echo "kafka-ref: --nodes wants a positive number" >&2; exit 2 ;;
esac
[ -n "$dir" ] || dir="$here/../out/kafka-ref/nodes-$nodes"
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# pid_of prints node i's pid when that process is alive and is this
# directory's Kafka (a pid file may outlive its process, and pids are
# reused).
pid_of() {
	local f="$dir/node-$1/pid" pid
	[ -s "$f" ] || return 1
	pid=$(cat "$f")
	[ -r "/proc/$pid/cmdline" ] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$dir/node-$1/server.properties" || return 1
	echo "$pid"
}

# answers reports whether the broker at host:port answers ApiVersions v0
# with error code 0: the broker is serving requests, not just listening.
answers() {
	python3 - "$1" <<'EOF'
import socket, struct, sys
host, port = sys.argv[1].rsplit(":", 1)
try:
    s = socket.create_connection((host, int(port)), timeout=2)
    s.settimeout(5)
    # size, api key 18, version 0, correlation id 7, null client id
    s.sendall(struct.pack(">ihhih", 10, 18, 0, 7, -1))
    buf = b""
    while len(buf) < 10:
        chunk = s.recv(10 - len(buf))
        if not chunk:
            sys.exit(1)
        buf += chunk
    _, corr, err = struct.unpack(">iih", buf)
    sys.exit(0 if corr == 7 and err == 0 else 1)
except OSError:
    sys.exit(1)
EOF
}

running() {
	local i
	[ -s "$dir/bootstrap" ] || return 1
	for ((i = 1; i <= nodes; i++)); do
		pid_of "$i" >/dev/null || return 1
	done
}

# stop_nodes stops every node the directory holds, whatever --nodes says.
stop_nodes() {
	local i nd pid pids=() waited
	for nd in "$dir"/node-*; do
		[ -d "$nd" ] || continue
		i=${nd##*/node-}
		if pid=$(pid_of "$i"); then
			kill -TERM "$pid" 2>/dev/null || true
			pids+=("$pid")
		fi
		rm -f "$nd/pid"
	done
	# A node of a cluster whose other controllers are already gone waits
	# for a quorum to shut down cleanly; the data is disposable, so give
	# it 20 s and then kill it.
	for ((waited = 0; waited < 40 && ${#pids[@]} > 0; waited++)); do
		local alive=()
		for pid in "${pids[@]}"; do
			kill -0 "$pid" 2>/dev/null && alive+=("$pid")
		done
		pids=("${alive[@]+"${alive[@]}"}")
		[ ${#pids[@]} -eq 0 ] || sleep 0.5
	done
	for pid in "${pids[@]+"${pids[@]}"}"; do
		kill -KILL "$pid" 2>/dev/null || true
	done
	rm -f "$dir/bootstrap"
}

# free_ports prints n loopback ports that were free a moment ago.
free_ports() {
	python3 - "$1" <<'EOF'
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

# kafka_uuid prints a random Kafka Uuid (16 bytes, URL-safe base64
# without padding), as StorageTool random-uuid does, without a JVM start.
kafka_uuid() {
	python3 -c '
import base64, os
while True:
    u = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
    if not u.startswith("-"):
        print(u)
        break'
}

# step notes on stderr how far a start got, with the time, so that a start
# that fails or is killed from outside says where it was.
step() { printf 'kafka-ref: %s %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# launch_nodes starts every node's JVM on its server.properties, in the
# background, its pid in node-i/pid (jpids[i] for wait_nodes).
jpids=()
launch_nodes() {
	local cp=$1 heap=$2 i
	for ((i = 1; i <= nodes; i++)); do
		local nd="$dir/node-$i"
		# shellcheck disable=SC2086
		setsid nohup java $heap -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true \
			-Dlog4j2.configurationFile="$here/log4j2.xml" -Dkafka.log.dir="$nd" \
			${KAFKA_OPTS:-} -cp "$cp" kafka.Kafka "$nd/server.properties" \
			>"$nd/stdout.log" 2>&1 </dev/null &
		jpids[i]=$!
		echo $! >"$nd/pid"
	done
}

# client_port prints node i's client port, from its server.properties.
client_port() {
	sed -n 's/^listeners=PLAINTEXT:\/\/127\.0\.0\.1:\([0-9]*\),.*/\1/p' "$dir/node-$1/server.properties"
}

# wait_nodes waits until every node logged "Kafka Server started" and
# answers ApiVersions; a node that exits or does not serve in time stops
# them all and fails the script.
wait_nodes() {
	local i client
	step "waiting for $nodes node(s) to serve"
	local deadline=$((SECONDS + ${KAFKA_REF_START_TIMEOUT:-180}))
	for ((i = 1; i <= nodes; i++)); do
		local nd="$dir/node-$i"
		client=$(client_port "$i")
		until grep -q "Kafka Server started" "$nd/server.log" 2>/dev/null && answers "127.0.0.1:$client"; do
			if ! pid_of "$i" >/dev/null; then
				local status=0
				wait "${jpids[i]}" || status=$?
				echo "kafka-ref: node $i exited while starting (exit status $status); its output and log:" >&2
				cat "$nd/stdout.log" >&2
				tail -n 40 "$nd/server.log" >&2 2>/dev/null || true
				rm -f "$dir/bootstrap.pending"
				stop_nodes
				exit 1
			fi
			if [ $SECONDS -ge $deadline ]; then
				echo "kafka-ref: node $i not serving after ${KAFKA_REF_START_TIMEOUT:-180}s; its log:" >&2
				tail -n 40 "$nd/server.log" >&2 2>/dev/null || true
				rm -f "$dir/bootstrap.pending"
				stop_nodes
				exit 1
			fi
			sleep 0.5
		done
	done
}

# kill_nodes SIGKILLs every node and waits until each is gone; data,
# configs and the bootstrap file stay.
kill_nodes() {
	local i pid
	for ((i = 1; i <= nodes; i++)); do
		if pid=$(pid_of "$i"); then
			kill -KILL "$pid" 2>/dev/null || true
			while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
		fi
		rm -f "$dir/node-$i/pid"
	done
}

# resume_nodes starts killed nodes again on their data.
resume_nodes() {
	local cp heap i n
	[ -s "$dir/bootstrap" ] || { echo "kafka-ref: nothing to resume in $dir (no bootstrap file)" >&2; exit 1; }
	for ((i = 1; i <= nodes; i++)); do
		[ -s "$dir/node-$i/server.properties" ] || { echo "kafka-ref: no node $i in $dir" >&2; exit 1; }
		if pid_of "$i" >/dev/null; then
			echo "kafka-ref: node $i still runs; kill it first" >&2
			exit 1
		fi
	done
	step "resolving the classpath"
	cp=$(timeout -k 5 300 "$java_dir/classpath.sh")
	heap=${KAFKA_HEAP_OPTS:-}
	if [ -z "$heap" ]; then
		if [ "$nodes" -eq 1 ]; then heap="-Xms128m -Xmx512m"; else heap="-Xms128m -Xmx384m"; fi
	fi
	for ((i = 1; i <= nodes; i++)); do
		# The new run's "Kafka Server started" is the one to wait for.
		for ((n = 1; ; n++)); do
			[ -e "$dir/node-$i/server.log.$n" ] || break
		done
		[ ! -e "$dir/node-$i/server.log" ] || mv "$dir/node-$i/server.log" "$dir/node-$i/server.log.$n"
	done
	launch_nodes "$cp" "$heap"
	wait_nodes
	cat "$dir/bootstrap"
}

start_nodes() {
	local cp heap ports i client controller voters="" bootstrap="" initial="" cluster_id
	step "resolving the classpath"
	cp=$(timeout -k 5 300 "$java_dir/classpath.sh")
	heap=${KAFKA_HEAP_OPTS:-}
	if [ -z "$heap" ]; then
		if [ "$nodes" -eq 1 ]; then heap="-Xms128m -Xmx512m"; else heap="-Xms128m -Xmx384m"; fi
	fi
	read -r -a ports <<<"$(free_ports $((2 * nodes)))"
	rm -rf "$dir"/node-* "$dir/bootstrap"
	cluster_id=$(kafka_uuid)
	local dir_ids=()
	for ((i = 1; i <= nodes; i++)); do
		dir_ids[i]=$(kafka_uuid)
		client=${ports[2 * (i - 1)]}
		controller=${ports[2 * (i - 1) + 1]}
		voters+="${voters:+,}127.0.0.1:$controller"
		initial+="${initial:+,}$i@127.0.0.1:$controller:${dir_ids[i]}"
		bootstrap+="${bootstrap:+,}127.0.0.1:$client"
	done
	for ((i = 1; i <= nodes; i++)); do
		local nd="$dir/node-$i"
		client=${ports[2 * (i - 1)]}
		controller=${ports[2 * (i - 1) + 1]}
		mkdir -p "$nd/data"
		{
			echo "# Written by compat/kafka-ref/kafka-ref.sh; rewritten on every start."
			echo "process.roles=broker,controller"
			echo "node.id=$i"
			echo "controller.quorum.bootstrap.servers=$voters"
			echo "listeners=PLAINTEXT://127.0.0.1:$client,CONTROLLER://127.0.0.1:$controller"
			echo "advertised.listeners=PLAINTEXT://127.0.0.1:$client,CONTROLLER://127.0.0.1:$controller"
			echo "controller.listener.names=CONTROLLER"
			echo "inter.broker.listener.name=PLAINTEXT"
			echo "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
			echo "log.dirs=$nd/data"
			if [ "$nodes" -lt 3 ]; then
				# Kafka's defaults want three brokers for its internal
				# topics; a smaller reference has to say it has fewer.
				echo "offsets.topic.replication.factor=$nodes"
				echo "transaction.state.log.replication.factor=$nodes"
				echo "transaction.state.log.min.isr=$nodes"
				echo "share.coordinator.state.topic.replication.factor=$nodes"
				echo "share.coordinator.state.topic.min.isr=$nodes"
			fi
			local s
			for s in "${sets[@]+"${sets[@]}"}"; do
				echo "$s"
			done
		} >"$nd/server.properties"
	done
	# Format every node's storage with Kafka's own tool, in parallel (one
	# JVM each). One node is its own standalone controller quorum; more
	# nodes format with the whole initial controller set (KIP-853).
	step "formatting $nodes node(s) in $dir"
	local fpids=()
	for ((i = 1; i <= nodes; i++)); do
		local nd="$dir/node-$i" quorum=(--standalone)
		[ "$nodes" -eq 1 ] || quorum=(--initial-controllers "$initial")
		timeout -k 5 120 java -Xmx256m -Dlog4j2.configurationFile="$here/log4j2.xml" -Dkafka.log.dir="$nd" -cp "$cp" \
			kafka.tools.StorageTool format --config "$nd/server.properties" \
			--cluster-id "$cluster_id" "${quorum[@]}" >"$nd/format.log" 2>&1 &
		fpids+=($!)
	done
	for ((i = 1; i <= nodes; i++)); do
		if ! wait "${fpids[i - 1]}"; then
			echo "kafka-ref: formatting node $i failed:" >&2
			cat "$dir/node-$i/format.log" >&2
			exit 1
		fi
	done
	echo "$bootstrap" >"$dir/bootstrap.pending"
	launch_nodes "$cp" "$heap"
	if [ -n "$owner" ]; then
		# The watcher outlives this script: it polls the owner and stops
		# the nodes once the owner is gone (it ends without stopping them
		# when they are stopped or failed to start: no bootstrap file).
		setsid nohup bash -c 'while kill -0 "$1" 2>/dev/null && [ -s "$3/bootstrap.pending" -o -s "$3/bootstrap" ]; do sleep 1; done; kill -0 "$1" 2>/dev/null || "$2" stop --nodes "$4" --dir "$3"' \
			watcher "$owner" "$here/kafka-ref.sh" "$dir" "$nodes" >/dev/null 2>&1 </dev/null &
	fi
	wait_nodes
	mv "$dir/bootstrap.pending" "$dir/bootstrap"
	echo "$bootstrap"
}

case "$cmd" in
start)
	if running; then
		cat "$dir/bootstrap"
		exit 0
	fi
	stop_nodes
	start_nodes
	;;
stop)
	stop_nodes
	;;
kill)
	kill_nodes
	;;
resume)
	resume_nodes
	;;
status)
	if running; then
		echo "running $(cat "$dir/bootstrap")"
	else
		echo "stopped"
		exit 1
	fi
	;;
*)
	usage
	;;
esac
