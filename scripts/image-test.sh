#!/usr/bin/env bash
# make image-test: build the image from the Dockerfile with podman (no
# Docker engine needed) and run it as docker-compose.yml does:
#
#   1. single node: the compose file's gregor service (its KAFKA_* and
#      CLUSTER_ID variables), its health check, records produced and
#      consumed from the host through the EXTERNAL listener and from
#      another container through PLAINTEXT (gregor:19092);
#   2. the cluster profile: gregor1..3 with their compose variables on one
#      network; records written with acks=all, one node killed, the other
#      two elect a controller, take new records and serve them all.
#
# Host ports are picked free and replace the compose file's 9092..9098 so
# the test runs beside other brokers. Where podman cannot run it prints
# "image-test: SKIP: ..." and exits 0.
#
# Environment:
#   PODMAN_OPTS    podman's global flags (default: vfs storage, cgroupfs,
#                  runc when installed: what runs inside an unprivileged
#                  VM or container; set "" on a workstation)
#   GO_IMAGE       the Dockerfile's toolchain image; default: one assembled
#                  here from busybox and CA certificates, with this
#                  machine's Go, module cache and build cache mounted, for
#                  machines with no container registry
#   KEEP=1         leave the containers, volumes and network afterwards
set -euo pipefail
cd "$(dirname "$0")/.."

start=$(date +%s)
say() { echo "image-test: $*"; }
skip() {
	say "SKIP: $*"
	exit 0
}
fail() {
	say "FAIL: $*"
	exit 1
}

command -v podman >/dev/null || skip "podman is not installed (Debian: apt-get install podman runc busybox-static golang-github-containernetworking-plugin-dnsname)"
if [ -z "${PODMAN_OPTS+set}" ]; then
	PODMAN_OPTS="--storage-driver vfs --cgroup-manager cgroupfs"
	# crun refuses cgroup v1 hierarchies with controllers also on v2
	# ("cgroups in hybrid mode not supported"); runc runs there.
	if command -v runc >/dev/null; then PODMAN_OPTS+=" --runtime runc"; fi
fi
# shellcheck disable=SC2086
pm() { podman $PODMAN_OPTS "$@"; }
pm info >/dev/null 2>&1 || skip "podman info fails: $(pm info 2>&1 | tail -1)"

# podman raises RLIMIT_NOFILE and RLIMIT_NPROC in the container, which
# needs CAP_SYS_RESOURCE; without it (runc: "error setting rlimits ...
# operation not permitted") keep them low: half this shell's open files,
# 4096 processes (the limit podman asks for, or half of this shell's,
# is refused too where the runtime's own limit is lower).
hard_n=$(ulimit -Hn)
[ "$hard_n" = unlimited ] && hard_n=1048576
run_opts=(--ulimit "nofile=$((hard_n / 2)):$((hard_n / 2))" --ulimit "nproc=4096:4096")

work=$(mktemp -d /tmp/gregor-image-test.XXXXXX)
tag=gregor-it-$$
image=localhost/gregor:image-test
net=$tag
containers=()
volumes=()
images=()
cleanup() {
	local rc=$?
	if [ "${KEEP:-}" = 1 ]; then
		say "kept: containers ${containers[*]:-}, volumes ${volumes[*]:-}, network $net, $work"
		return
	fi
	for c in "${containers[@]}"; do pm rm -f -v -t 0 "$c" >/dev/null 2>&1 || true; done
	for v in "${volumes[@]}"; do pm volume rm -f "$v" >/dev/null 2>&1 || true; done
	pm network rm -f "$net" >/dev/null 2>&1 || true
	for i in "${images[@]}"; do pm rmi -f "$i" >/dev/null 2>&1 || true; done
	rm -rf "$work"
	exit $rc
}
trap cleanup EXIT

# The host's gregor is the client (produce, consume, cluster info).
say "building the client"
go build -o "$work/gregor" ./cmd/gregor
gregor=$work/gregor

build_opts=(--build-arg "VERSION=$(git describe --always --dirty 2>/dev/null || echo dev)")
if [ -z "${GO_IMAGE:-}" ]; then
	# No registry: a toolchain image of busybox (the RUN steps' shell,
	# mkdir, cp) and CA certificates, with the Go, modules and build cache
	# of this machine mounted where golang's image has them.
	command -v busybox >/dev/null || skip "busybox is needed for the local toolchain image (apt-get install busybox-static), or set GO_IMAGE"
	go mod download
	goroot=$(go env GOROOT)
	GO_IMAGE=localhost/gregor-gobuild:$(go env GOVERSION)
	rootfs=$work/gobuild
	mkdir -p "$rootfs"/{bin,etc/ssl/certs,tmp,root,go}
	chmod 1777 "$rootfs/tmp"
	cp "$(command -v busybox)" "$rootfs/bin/busybox"
	for a in $(busybox --list); do [ "$a" = busybox ] || ln -sf busybox "$rootfs/bin/$a"; done
	cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/"
	echo 'root:x:0:0:root:/root:/bin/sh' >"$rootfs/etc/passwd"
	echo 'root:x:0:' >"$rootfs/etc/group"
	tar -C "$rootfs" -cf "$work/gobuild.tar" .
	pm import --change 'ENV PATH=/go/bin:/usr/local/go/bin:/bin' --change 'ENV GOPATH=/go' \
		--change 'ENV GOTOOLCHAIN=local' --change 'ENV GOPROXY=off' \
		"$work/gobuild.tar" "$GO_IMAGE" >/dev/null 2>&1
	images+=("$GO_IMAGE")
	build_opts+=(-v "$goroot:/usr/local/go:ro" -v "$(go env GOMODCACHE):/go/pkg/mod"
		-v "$(go env GOCACHE):/root/.cache/go-build")
fi
say "building $image from the Dockerfile (GO_IMAGE=$GO_IMAGE)"
t0=$(date +%s)
images+=("$image")
# --format docker: the OCI image format has no HEALTHCHECK. --layers=false:
# no intermediate images left behind (the Go build cache is what makes a
# second build fast).
if ! pm build --format docker --layers=false --isolation chroot --build-arg "GO_IMAGE=$GO_IMAGE" "${build_opts[@]}" -t "$image" . >"$work/build.log" 2>&1; then
	tail -20 "$work/build.log"
	fail "podman build"
fi
say "built in $(($(date +%s) - t0)) s, $(pm image inspect --format '{{.Size}}' "$image") bytes"
[ "$(pm image inspect --format '{{.Config.User}}' "$image")" = 1000:1000 ] || fail "the image does not run as 1000:1000"

if ! pm run --rm "${run_opts[@]}" "$image" version >"$work/probe" 2>&1; then
	skip "podman cannot run a container here (see docs/operations.md, The Docker image): $(tail -1 "$work/probe")"
fi

pm network create "$net" >/dev/null
# The nodes find each other by name (gregor1:9093), as on a compose
# network: podman's CNI backend needs the dnsname plugin for that.
[ "$(pm network inspect --format '{{.DNSEnabled}}' "$net")" = true ] ||
	skip "podman network $net has no DNS (Debian: apt-get install golang-github-containernetworking-plugin-dnsname)"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# compose_env SERVICE: the service's environment in docker-compose.yml as
# NAME=value lines.
compose_env() {
	awk -v svc="  $1:" '
		$0 == svc { in_svc = 1; next }
		in_svc && /^  [^ ]/ { exit }
		in_svc && /^    environment:/ { in_env = 1; next }
		in_svc && in_env && /^    [^ ]/ { in_env = 0 }
		in_svc && in_env && /^      [A-Z_]+: / {
			name = $1; sub(/:$/, "", name)
			val = $0; sub(/^[^:]*: */, "", val); gsub(/^"|"$/, "", val)
			print name "=" val
		}' docker-compose.yml
}

# start NAME SERVICE COMPOSE_PORT HOST_PORT: runs SERVICE's environment
# as container NAME, reachable as SERVICE on the network, its EXTERNAL
# listener moved from COMPOSE_PORT to HOST_PORT.
start() {
	local name=$1 svc=$2 from=$3 to=$4
	compose_env "$svc" | sed "s/:$from\b/:$to/g" >"$work/$svc.env"
	grep -q "EXTERNAL://localhost:$to" "$work/$svc.env" || fail "no EXTERNAL listener on $from in $svc's environment"
	containers+=("$name")
	volumes+=("$name-data")
	pm run -d "${run_opts[@]}" --name "$name" --hostname "$svc" --network "$net" --network-alias "$svc" \
		-p "127.0.0.1:$to:$to" -v "$name-data:/var/lib/gregor/data" --env-file "$work/$svc.env" "$image" >/dev/null 2>"$work/$name.run" ||
		{ cat "$work/$name.run"; fail "podman run $name"; }
}

# healthy NAME: waits for the image's HEALTHCHECK to pass in NAME.
healthy() {
	for _ in $(seq 60); do
		if pm healthcheck run "$1" >/dev/null 2>&1; then return 0; fi
		sleep 1
	done
	pm logs --tail 20 "$1" || true
	fail "$1 not healthy after 60 s"
}

expect_records() { # expect_records WANT_FILE GOT_FILE WHAT
	if ! diff <(sort "$1") <(sort "$2") >"$work/diff"; then
		cat "$work/diff"
		fail "$3: the records read back differ from those written"
	fi
	say "ok: $3 ($(wc -l <"$2") records)"
}

# --- 0. no variables: the image's own single node (0.0.0.0:9092) ---
containers+=("$tag-plain")
pm run -d "${run_opts[@]}" --name "$tag-plain" "$image" >/dev/null 2>"$work/plain.run" ||
	{ cat "$work/plain.run"; fail "podman run $tag-plain"; }
healthy "$tag-plain"
pm rm -f -v -t 5 "$tag-plain" >/dev/null 2>&1
say "ok: the image without variables runs a healthy single node"

# --- 1. single node ---
t0=$(date +%s)
p=$(free_port)
start "$tag-single" gregor 9092 "$p"
healthy "$tag-single"
say "ok: single node healthy (HEALTHCHECK gregor container-health), EXTERNAL on localhost:$p"
seq 1 100 | sed 's/^/single-/' >"$work/single.want"
"$gregor" topic create -b "localhost:$p" -p 3 image-test >/dev/null
"$gregor" produce -b "localhost:$p" --quiet -F "$work/single.want" image-test >/dev/null
"$gregor" consume -b "localhost:$p" --from-beginning -e image-test >"$work/single.got" 2>/dev/null
expect_records "$work/single.want" "$work/single.got" "host produce/consume through EXTERNAL"
pm run --rm "${run_opts[@]}" --network "$net" "$image" consume -b gregor:19092 --from-beginning -e image-test \
	>"$work/single.inner" 2>/dev/null
expect_records "$work/single.want" "$work/single.inner" "consume from another container through PLAINTEXT gregor:19092"
pm rm -f -v -t 5 "$tag-single" >/dev/null
say "single node: $(($(date +%s) - t0)) s"

# --- 2. the cluster profile ---
t0=$(date +%s)
declare -A port
for i in 1 2 3; do
	port[$i]=$(free_port)
	start "$tag-$i" "gregor$i" $((9092 + 2 * i)) "${port[$i]}"
done
for i in 1 2 3; do healthy "$tag-$i"; done
all="localhost:${port[1]},localhost:${port[2]},localhost:${port[3]}"
for _ in $(seq 30); do
	n=$("$gregor" cluster info -b "$all" 2>/dev/null | grep -cE '^[123]\*? +localhost' || true)
	[ "$n" -ge 3 ] && break
	sleep 1
done
"$gregor" cluster info -b "$all"
"$gregor" topic create -b "$all" -p 3 -r 3 image-test >/dev/null
seq 1 100 | sed 's/^/before-/' >"$work/before"
"$gregor" produce -b "$all" --quiet -F "$work/before" image-test >/dev/null
say "ok: three nodes formed a cluster; 100 records written with acks=all, replication factor 3"

[ "$n" -ge 3 ] || fail "cluster info does not list three brokers"
# The node killed is the active controller: the other two must elect one.
victim=$("$gregor" cluster info -b "$all" | awk '$1 == "CONTROLLER" { print $2 }')
case $victim in 1 | 2 | 3) ;; *) fail "no active controller in cluster info" ;; esac
pm kill "$tag-$victim" >/dev/null
say "killed $tag-$victim, the active controller"
survivors=
for i in 1 2 3; do [ "$i" = "$victim" ] || survivors+="${survivors:+,}localhost:${port[$i]}"; done
seq 1 100 | sed 's/^/after-/' >"$work/after"
# One produce, whose client retries while the survivors elect a new
# controller and partition leaders: a second run after a failed one
# could write some records twice.
t1=$(date +%s)
if ! "$gregor" produce -b "$survivors" --quiet --timeout 60s -F "$work/after" image-test >/dev/null 2>"$work/produce.err"; then
	cat "$work/produce.err"
	fail "the two survivors did not take records"
fi
say "ok: 100 more records written with acks=all to the two survivors ($(($(date +%s) - t1)) s after the kill)"
"$gregor" cluster info -b "$survivors"
cat "$work/before" "$work/after" >"$work/cluster.want"
"$gregor" consume -b "$survivors" --from-beginning -e image-test >"$work/cluster.got" 2>/dev/null
expect_records "$work/cluster.want" "$work/cluster.got" "two of three nodes serve every record after one was killed"
say "cluster: $(($(date +%s) - t0)) s"
say "PASS in $(($(date +%s) - start)) s"
