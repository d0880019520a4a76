#!/usr/bin/env bash
# classpath.sh prints the classpath of Kafka's jars pinned by pom.xml
# (the reference broker, its tools, the Java client, Streams, Connect),
# resolving them from Maven Central into ~/.m2 the first time and caching
# the result in target/classpath.txt until pom.xml changes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache="$here/target/classpath.txt"
if [ ! -s "$cache" ] || [ "$here/pom.xml" -nt "$cache" ]; then
	mkdir -p "$here/target"
	mvn -q -B -f "$here/pom.xml" dependency:build-classpath \
		-Dmdep.outputFile="$cache.tmp" >&2
	mv "$cache.tmp" "$cache"
fi
cat "$cache"
