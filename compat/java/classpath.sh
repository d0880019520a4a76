#!/usr/bin/env bash
# classpath.sh [connect] prints the classpath of Kafka's jars pinned by
# pom.xml (the reference broker, its tools, the Java client, Streams and
# Connect's runtime), or with "connect" by connect/pom.xml (Kafka Connect
# with the file connectors, a release of its own: see that file),
# resolving them from Maven Central into ~/.m2 the first time and caching
# the result in target/classpath.txt (target/classpath-connect.txt) until
# the pom changes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pom="$here/pom.xml"
cache="$here/target/classpath.txt"
case "${1:-}" in
'') ;;
connect)
	pom="$here/connect/pom.xml"
	cache="$here/target/classpath-connect.txt"
	;;
*) echo "usage: classpath.sh [connect]" >&2; exit 2 ;;
esac
if [ ! -s "$cache" ] || [ "$pom" -nt "$cache" ]; then
	mkdir -p "$here/target"
	mvn -q -B -f "$pom" dependency:build-classpath \
		-Dmdep.outputFile="$cache.tmp" >&2
	mv "$cache.tmp" "$cache"
fi
cat "$cache"
