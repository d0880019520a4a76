#!/usr/bin/env bash
# librdkafka's own test suite (tests/ of Debian's librdkafka source package)
# against a real gregor process: `make compat-librdkafka`.
#
# Steps, each skipped when its result is already there:
#   1. a deb-src entry beside the machine's Debian sources (same URIs,
#      suites, components and key), the build dependencies, and
#      `apt-get source librdkafka` into compat/out/librdkafka;
#   2. the library and the test-runner built there (-j2);
#   3. gregor built from this checkout and started on free loopback ports
#      with the broker settings of librdkafka's default test scenario;
#   4. each test of compat/librdkafka/expected.txt in its own test-runner
#      (JOBS at a time, each bounded by a timeout), its log in
#      out/logs/<test>.log.
#   5. a test listed as "pass" that did not pass run once more, alone.
# Fails when a test listed as "pass" does not pass; the others are known
# gaps, explained in compat/librdkafka/README.md. UPDATE=1 rewrites the
# status column of expected.txt from this run.
#
# Usage: compat/librdkafka/run.sh [TESTNUM...]   (e.g. 0030 0001; default:
#        every test in expected.txt)
# Environment: UPDATE=1, QUICK=1 (test-runner -Q), TEST_TIMEOUT (seconds a
#        test-runner may take, default 180), JOBS (test-runners at once,
#        default 4), GO (go binary).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="$root/compat/out/librdkafka"
expected="$here/expected.txt"
GO=${GO:-go}
TEST_TIMEOUT=${TEST_TIMEOUT:-180}
JOBS=${JOBS:-4}
# The newest Kafka that librdkafka 2.0.2's suite knows (tests/Makefile's
# KAFKA_VERSION); it enables the tests gated on a broker version.
TEST_KAFKA_VERSION=${TEST_KAFKA_VERSION:-3.1.0}
srcsources=/etc/apt/sources.list.d/gregor-librdkafka-src.sources

log() { printf 'compat-librdkafka: %s\n' "$*" >&2; }

# debsrc_entry writes a deb-src stanza for every "Types: deb" stanza of the
# machine's Debian sources, so that apt-get source reaches the same archive
# (and snapshot) the binary packages come from. Idempotent: the file is
# rewritten only when its content would change.
debsrc_entry() {
	local src=/etc/apt/sources.list.d/debian.sources
	if [ ! -f "$src" ]; then
		log "no $src: cannot derive a deb-src entry"
		return 1
	fi
	local want
	want=$(sed -e 's/^Types:[[:space:]]*deb[[:space:]]*$/Types: deb-src/' "$src")
	if ! grep -q '^Types: deb-src' <<<"$want"; then
		log "$src has no 'Types: deb' stanza to mirror"
		return 1
	fi
	if [ -f "$srcsources" ] && [ "$(cat "$srcsources")" = "$want" ]; then
		return 0
	fi
	printf '%s\n' "$want" >"$srcsources"
	log "wrote $srcsources"
	return 2 # changed: the caller runs apt-get update
}

# fetch_source installs the build dependencies of Debian's librdkafka
# package that this build uses and unpacks the source into $out/src.
fetch_source() {
	if ls -d "$out"/src/librdkafka-*/tests >/dev/null 2>&1; then
		return 0
	fi
	local rc=0
	debsrc_entry || rc=$?
	if [ "$rc" = 1 ]; then return 1; fi
	if [ "$rc" = 2 ] || ! apt-cache showsrc librdkafka >/dev/null 2>&1 ||
		[ -z "$(apt-cache showsrc librdkafka 2>/dev/null)" ]; then
		apt-get update -qq
	fi
	# Debian's Build-Depends minus debhelper (packaging only), plus the
	# compilers and dpkg-source, which unpacks and patches the source.
	local deps="gcc g++ make pkg-config python3 dpkg-dev zlib1g-dev libssl-dev libzstd-dev liblz4-dev libsasl2-dev rapidjson-dev"
	local missing="" p
	for p in $deps; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
	if [ -n "$missing" ]; then
		log "installing$missing"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null
	fi
	rm -rf "$out/src" && mkdir -p "$out/src"
	(cd "$out/src" && apt-get source -qq librdkafka)
	ls -d "$out"/src/librdkafka-*/tests >/dev/null
}

# build compiles the library (C and C++) and the test-runner.
build() {
	local dir
	dir=$(ls -d "$out"/src/librdkafka-*/ | head -1)
	if [ -x "$dir/tests/test-runner" ]; then
		echo "$dir"
		return 0
	fi
	log "building $(basename "$dir") (log: $out/build.log)"
	(
		cd "$dir"
		# No GSSAPI (Kerberos) and no libcurl (OIDC): the tests run
		# against a PLAINTEXT listener only.
		./configure --no-download --disable-gssapi --disable-curl
		make -j2 libs
		make -C tests -j2 build
	) >"$out/build.log" 2>&1 || {
		tail -30 "$out/build.log" >&2
		return 1
	}
	echo "$dir"
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

gregor_pid=""
stop_gregor() {
	if [ -n "$gregor_pid" ] && kill -0 "$gregor_pid" 2>/dev/null; then
		kill -INT "$gregor_pid" 2>/dev/null || true
		for _ in $(seq 1 100); do
			kill -0 "$gregor_pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$gregor_pid" 2>/dev/null || true
	fi
	gregor_pid=""
}
trap stop_gregor EXIT

# start_gregor runs gregor with librdkafka's default test scenario
# (tests/scenarios/default.json: auto-created topics with 4 partitions) and
# waits for its start line. Sets gregor_addr. group.initial.rebalance.delay.ms
# keeps Kafka's 3 s: tests such as 0089 and 0118 start two consumers and
# expect both in the group's first generation.
start_gregor() {
	local port data
	port=$(free_port)
	data="$out/gregor-data"
	rm -rf "$data"
	gregor_addr="127.0.0.1:$port"
	"$out/gregor" serve --data-dir "$data" --listen "$gregor_addr" \
		--override num.partitions=4 \
		--override auto.create.topics.enable=true \
		>"$out/gregor.log" 2>&1 &
	gregor_pid=$!
	for _ in $(seq 1 300); do
		if grep -q 'msg="gregor started"' "$out/gregor.log"; then return 0; fi
		if ! kill -0 "$gregor_pid" 2>/dev/null; then break; fi
		sleep 0.1
	done
	log "gregor did not start:"
	tail -20 "$out/gregor.log" >&2
	return 1
}

# tests_to_run prints the test numbers to run: the arguments, else every
# distinct number in expected.txt.
tests_to_run() {
	if [ $# -gt 0 ]; then
		printf '%s\n' "$@"
		return
	fi
	awk '!/^#/ && NF >= 2 { print substr($2, 1, 4) }' "$expected" | sort -u
}

# run_one runs the test-runner for one test number and writes
# "name<TAB>STATE<TAB>seconds<TAB>reason" lines for every test it ran to
# $out/results/<num>.tsv.
run_one() {
	local num=$1 dir=$2 logf="$out/logs/$1.log" rc=0 args=(-L) t0=$SECONDS
	if [ -n "${QUICK:-}" ]; then args+=(-Q); fi
	(
		cd "$dir/tests"
		# CI=1 everywhere: the suite skips its timing-sensitive tests
		# (0055's latency bounds) and lowers its concurrency when CI is set,
		# so a run here and on the CI machine must see the same CI.
		CI=1 RDKAFKA_TEST_CONF="$out/test.conf" TESTS="$num" \
			LD_LIBRARY_PATH="../src:../src-cpp" \
			TEST_KAFKA_VERSION="$TEST_KAFKA_VERSION" \
			timeout -k 10 "$TEST_TIMEOUT" stdbuf -oL -eL ./test-runner "${args[@]}"
	) >"$logf" 2>&1 || rc=$?
	# The summary table: "| <name> | <STATE> | <secs>s | <reason>".
	local rows
	rows=$(sed -e 's/\x1b\[[0-9;]*m//g' "$logf" |
		awk -F'|' -v n="$num" '
			/^\|/ && NF >= 4 {
				name=$2; st=$3; d=$4; why=$5
				for (i = 6; i <= NF; i++) why = why "|" $i
				gsub(/^ +| +$/, "", name); gsub(/ /, "", st); gsub(/[ s]/, "", d)
				gsub(/^ +| +$/, "", why)
				if (name ~ "^" n "_") { row[name] = name "\t" st "\t" d "\t" why; if (!(name in seen)) order[++k] = name; seen[name] = 1 }
			}
			# A timeout is reported after the table: take the message
			# that follows the first "### Test" header.
			/^### Test "/ && !hdr { hdr = 1; getline msg }
			END { for (i = 1; i <= k; i++) { r = row[order[i]]; if (r ~ /\tFAILED\t[^\t]*\t$/) r = r msg; print r } }')
	if [ -z "$rows" ]; then
		# No summary: the runner was killed (timeout) or crashed.
		local why="test-runner exited $rc without a summary"
		if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then why="timed out after ${TEST_TIMEOUT}s"; fi
		rows=$(printf '%s\t%s\t%s\t%s' "$num" "FAILED" "$TEST_TIMEOUT" "$why")
	fi
	printf '%s\n' "$rows" >"$out/results/$num.tsv"
	log "$num: $(awk -F'\t' '{printf "%s=%s ", $1, $2}' "$out/results/$num.tsv")($((SECONDS - t0))s)"
}

main() {
	mkdir -p "$out"
	fetch_source
	local dir
	dir=$(build)
	log "building gregor"
	(cd "$root" && "$GO" build -o "$out/gregor" ./cmd/gregor)
	start_gregor
	log "gregor at $gregor_addr (log: $out/gregor.log)"
	cat >"$out/test.conf" <<-EOF
		bootstrap.servers=$gregor_addr
		test.topic.random=true
	EOF
	rm -rf "$out/logs" "$out/results" && mkdir -p "$out/logs" "$out/results"
	# JOBS test-runners at a time: the tests mostly wait on the broker and
	# on timers, and each uses its own random topic and group names.
	local num t0=$SECONDS pids=()
	for num in $(tests_to_run "$@"); do
		# Running jobs but gregor, which is one of this shell's jobs too.
		while [ "$(jobs -rp | grep -cvx "$gregor_pid")" -ge "$JOBS" ]; do sleep 0.5; done
		run_one "$num" "$dir" &
		pids+=($!)
	done
	wait "${pids[@]}"
	# A test expected to pass that did not runs once more, alone: a few
	# of the suite's tests assume client-side timing (0086_purge_remote,
	# how many messages the first request batches) that JOBS runners on
	# two cores can upset. The first log stays beside the second, and
	# the retry is logged; a test that fails alone too fails the run.
	gather_results
	for num in $(missing_passes "$out/results.tsv" "$@" | cut -c1-4 | sort -u); do
		mv "$out/logs/$num.log" "$out/logs/$num.first.log"
		log "$num: expected to pass, failed next to $((JOBS - 1)) other runners; running it again alone (first log: logs/$num.first.log)"
		run_one "$num" "$dir"
	done
	gather_results
	log "all tests ran in $((SECONDS - t0))s"
	if ! kill -0 "$gregor_pid" 2>/dev/null; then
		log "gregor exited during the run: see $out/gregor.log"
		echo "gregor-process	FAILED	0	gregor exited during the run" >>"$out/results.tsv"
	fi
	stop_gregor
	compare "$@"
}

# gather_results joins the tests' results into $out/results.tsv.
gather_results() {
	cat "$out"/results/*.tsv >"$out/results.tsv" 2>/dev/null || : >"$out/results.tsv"
}

# missing_passes prints the tests marked pass in expected.txt, of those
# run (all, or the numbers named after the results file), that results
# (a results.tsv) does not show PASSED.
missing_passes() {
	local results=$1 name
	shift
	for name in $(awk '$1 == "pass" { print $2 }' "$expected"); do
		if [ $# -gt 0 ] && ! printf '%s\n' "$@" | grep -qx "${name:0:4}"; then continue; fi
		if ! awk -F'\t' -v n="$name" '$1 == n && $2 == "PASSED" { ok=1 } END { exit !ok }' "$results" 2>/dev/null; then
			echo "$name"
		fi
	done
}

# compare prints the table and fails when a test expected to pass did not.
compare() {
	local passed failed skipped regressions=""
	passed=$(awk -F'\t' '$2 == "PASSED"' "$out/results.tsv" | wc -l)
	failed=$(awk -F'\t' '$2 != "PASSED" && $2 != "SKIPPED"' "$out/results.tsv" | wc -l)
	skipped=$(awk -F'\t' '$2 == "SKIPPED"' "$out/results.tsv" | wc -l)
	column -t -s "$(printf '\t')" "$out/results.tsv" | cut -c1-200
	if grep -q 'panic:\|WARNING: DATA RACE' "$out/gregor.log"*; then
		log "gregor panicked or raced: see $out/gregor.log"
		regressions="gregor-log"
	fi
	local name
	for name in $(missing_passes "$out/results.tsv" "$@"); do
		regressions="$regressions $name"
	done
	if [ -n "${UPDATE:-}" ]; then
		update_expected
	fi
	echo "librdkafka: $passed passed, $failed failed, $skipped skipped"
	if [ -n "$regressions" ] && [ -z "${UPDATE:-}" ]; then
		log "expected to pass but did not:$regressions (logs in $out/logs)"
		return 1
	fi
}

# update_expected rewrites the status of each test in expected.txt from
# results.tsv, keeping comments and the notes after the name.
update_expected() {
	local tmp="$expected.tmp"
	awk 'NR == FNR { split($0, r, "\t"); st[r[1]] = (r[2] == "PASSED" ? "pass" : r[2] == "SKIPPED" ? "skip" : "fail"); next }
		/^#/ || NF < 2 || !($2 in st) { print; next }
		{ sub(/^[a-z]+/, st[$2]); print }' \
		"$out/results.tsv" "$expected" >"$tmp"
	mv "$tmp" "$expected"
	log "updated $expected"
}

main "$@"
