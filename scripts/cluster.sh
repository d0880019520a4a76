#!/usr/bin/env bash
# Starts the three-node cluster of docker-compose.yml as local processes:
# each node broker and controller, clients on localhost:9092, :9094 and
# :9096, replication on :19092/:19094/:19096, the metadata quorum on
# :19093/:19095/:19097, the HTTP listeners (/metrics, /healthz, /readyz)
# on :9644/:9645/:9646, data in ./data/cluster/nodeN, logs beside it.
# Ctrl-C (or SIGTERM) stops the three nodes cleanly; a node that exits or
# is killed (kill -9 its pid to try failover) leaves the other two running.
#
#   scripts/cluster.sh             run the cluster (make cluster)
#   scripts/cluster.sh --print N   print node N's serve arguments, one per line
#
# Environment: GREGOR_BIN (default bin/gregor), GREGOR_CLUSTER_DIR (default
# ./data/cluster), GREGOR_CLUSTER_HOST (default 127.0.0.1),
# GREGOR_CLUSTER_PORT (first client port, default 9092; node N uses
# PORT+2(N-1) for clients, +10000 for replication, +10001 for the quorum,
# and PORT+552+(N-1) for HTTP; every one must be free and below the
# kernel's ephemeral range, or the script refuses to start).
# integration/cluster_script_test.go runs this script on free ports.
set -euo pipefail

bin=${GREGOR_BIN:-bin/gregor}
dir=${GREGOR_CLUSTER_DIR:-./data/cluster}
host=${GREGOR_CLUSTER_HOST:-127.0.0.1}
base=${GREGOR_CLUSTER_PORT:-9092}

client_port() { echo $((base + 2 * ($1 - 1))); }
internal_port() { echo $((base + 10000 + 2 * ($1 - 1))); }
controller_port() { echo $((base + 10001 + 2 * ($1 - 1))); }
http_port() { echo $((base + 552 + $1 - 1)); }

# node_args N prints the serve arguments of node N: the properties of
# docker-compose.yml with loopback addresses and a data dir of its own.
# The shared cluster.id does what `gregor format --cluster-id` on each
# node would: a multi-node quorum whose nodes have no common cluster id
# stops at start.
node_args() {
	local n=$1 voters="" i
	for i in 1 2 3; do
		voters+="${voters:+,}$i@$host:$(controller_port "$i")"
	done
	local props=(
		"node.id=$n"
		"process.roles=broker,controller"
		"controller.quorum.voters=$voters"
		"listeners=PLAINTEXT://$host:$(internal_port "$n"),EXTERNAL://$host:$(client_port "$n"),CONTROLLER://$host:$(controller_port "$n")"
		"advertised.listeners=PLAINTEXT://$host:$(internal_port "$n"),EXTERNAL://$host:$(client_port "$n")"
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"
		"inter.broker.listener.name=PLAINTEXT"
		"log.dirs=$dir/node$n"
		"cluster.id=MkU3OEVBNTcwNTJENDM2Qg"
		"default.replication.factor=3"
		"min.insync.replicas=2"
		"offsets.topic.replication.factor=3"
		"transaction.state.log.replication.factor=3"
		"transaction.state.log.min.isr=2"
		# Not in docker-compose.yml, where each container has its own
		# localhost: here the three nodes share one, so each needs a port.
		"http.listener=$host:$(http_port "$n")"
	)
	echo serve
	local p
	for p in "${props[@]}"; do
		printf -- '--override\n%s\n' "$p"
	done
}

if [[ ${1:-} == --print ]]; then
	node_args "${2:?usage: cluster.sh --print N}"
	exit 0
fi

# check_ports refuses a layout with a port in the kernel's ephemeral
# range (an outgoing connection may take any of those at any moment) or a
# port some socket holds now; --print leaves the choice to its caller
# (compat/cmd/benchcompare picks free ports below the range).
check_ports() {
	local lo=32768 hi=60999 n kind port
	if [[ -r /proc/sys/net/ipv4/ip_local_port_range ]]; then
		read -r lo hi </proc/sys/net/ipv4/ip_local_port_range
	fi
	for n in 1 2 3; do
		for kind in client internal controller http; do
			port=$("${kind}_port" "$n")
			if ((port >= lo && port <= hi)); then
				echo "cluster.sh: node $n's $kind port $port is in the ephemeral range $lo-$hi, where outgoing connections take ports; set GREGOR_CLUSTER_PORT so that PORT+10005 is below $lo" >&2
				return 1
			fi
			if port_taken "$port"; then
				echo "cluster.sh: node $n's $kind port $port is in use; set GREGOR_CLUSTER_PORT to another first port" >&2
				return 1
			fi
		done
	done
}

# port_taken reports whether a TCP socket on this machine holds port:
# with ss any socket bound to it, else one listening on it.
port_taken() {
	if command -v ss >/dev/null; then
		[[ -n $(ss -Htan "( sport = :$1 )" 2>/dev/null) ]]
	else
		(exec 3<>"/dev/tcp/$host/$1") 2>/dev/null
	fi
}

if [[ ! -x $bin ]]; then
	echo "cluster.sh: $bin not found; run make build (make cluster does)" >&2
	exit 1
fi

check_ports || exit 1
mkdir -p "$dir"
pids=()
stop() {
	trap - INT TERM EXIT
	if ((${#pids[@]})); then
		kill -TERM "${pids[@]}" 2>/dev/null || true
		wait "${pids[@]}" 2>/dev/null || true
	fi
	echo "cluster stopped"
}
trap 'stop; exit 0' INT TERM
trap stop EXIT

for n in 1 2 3; do
	mapfile -t args < <(node_args "$n")
	"$bin" "${args[@]}" >"$dir/node$n.log" 2>&1 &
	pids+=($!)
	echo "node $n: pid $!, clients on $host:$(client_port "$n"), metrics on http://$host:$(http_port "$n")/metrics, data in $dir/node$n, log in $dir/node$n.log"
done
echo "bootstrap servers: $host:$(client_port 1),$host:$(client_port 2),$host:$(client_port 3) (Ctrl-C stops the cluster)"

# A node that exits (or is killed, which is how people try failover)
# leaves the others running: the script says so, with the command that
# restarts it, and ends once every node has exited or on Ctrl-C.
running=("${pids[@]}")
while ((${#running[@]})); do
	status=0
	wait -n -p done_pid "${running[@]}" || status=$?
	left=()
	for i in "${!running[@]}"; do
		[[ ${running[$i]} == "$done_pid" ]] || left+=("${running[$i]}")
	done
	running=("${left[@]}")
	for n in 1 2 3; do
		if [[ ${pids[$((n - 1))]} == "$done_pid" ]]; then
			echo "node $n exited with status $status; the other nodes keep running (restart it with: $0 --print $n | xargs -d '\n' $bin); see $dir/node$n.log" >&2
		fi
	done
done
echo "every node has exited" >&2
exit 1
