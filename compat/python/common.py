"""Shared pieces of the Python clients' scenarios.

The data written matches the Go scenarios (compat/checks_test.go): the
same keys, values, counts and checksum, so that the runner's out-of-band
post-checks hold for every client. Each script prints one JSON line,
{"status": "pass"|"fail"|"n/a", "reason": "..."}, and exits 0; anything
else is reported by the runner as a failure with the script's stderr.
"""

import argparse
import os
import hashlib
import json
import sys
import time
import traceback
import zlib

PRODUCE_COUNT = 1000
ORDER_KEYS = 20
ORDER_COUNT = 2000
BULK_COUNT = 100000
ONE_MIB = 1 << 20
BIG_TOPIC_MAX = 2 << 20
SMALL_TOPIC_MAX = 10000
TOO_LARGE_VALUE = 20000
# Record i of listoffsets.time is stamped TIME_BASE + i seconds
# (2024-01-01T00:00:00Z in milliseconds).
TIME_BASE = 1704067200000

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


class NotApplicable(Exception):
    """The client itself lacks the feature the scenario needs."""


class Fail(Exception):
    """The scenario failed; the message is the reason."""


def produce_key(i):
    return "key-%d" % i


def produce_value(i):
    return "value-%d-%s" % (i, "x" * (i % 37))


def bulk_value(i):
    return "bulk-%06d" % i


def bulk_sum(values):
    """Sum of the CRC-32 of every value: independent of the order read."""
    return sum(zlib.crc32(v) for v in values)


def want_bulk_sum():
    return bulk_sum(bulk_value(i).encode() for i in range(BULK_COUNT))


def big_value():
    """1 MiB of deterministic, incompressible bytes and their SHA-256."""
    out = bytearray()
    counter = 0
    while len(out) < ONE_MIB:
        out += hashlib.sha256(counter.to_bytes(8, "big")).digest()
        counter += 1
    b = bytes(out[:ONE_MIB])
    return b, hashlib.sha256(b).hexdigest()


def check_order(records):
    """records: (key, value, partition) in offset order per partition."""
    part, nxt = {}, {}
    for key, value, p in records:
        if key in part and part[key] != p:
            raise Fail("key %s in partitions %d and %d" % (key, part[key], p))
        part[key] = p
        if value != str(nxt.get(key, 0)):
            raise Fail("key %s: value %r, want %d" % (key, value, nxt.get(key, 0)))
        nxt[key] = nxt.get(key, 0) + 1
    if len(records) != ORDER_COUNT or len(part) != ORDER_KEYS:
        raise Fail("read %d records over %d keys, want %d over %d"
                   % (len(records), len(part), ORDER_COUNT, ORDER_KEYS))


def committed_values():
    return ["t%d-%d" % (t, i) for t in (0, 2) for i in range(10)]


def wait_for(what, cond, timeout=15.0):
    """Polls cond every 100 ms until it returns None or timeout passes."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = cond()
        if last is None:
            return
        time.sleep(0.1)
    raise Fail("%s: still %s after %.0fs" % (what, last, timeout))


def main(scenarios):
    """Runs the scenario named on the command line and prints its result."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True, help="gregor with auto-create on")
    ap.add_argument("--strict", required=True, help="gregor with auto-create off")
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--topic", required=True)
    args = ap.parse_args()
    fn = scenarios.get(args.scenario)
    result = {"status": "pass", "reason": ""}
    try:
        if fn is None:
            raise Fail("scenario not written for this client")
        note = fn(args)
        if note:
            result["reason"] = note
    except NotApplicable as e:
        result = {"status": "n/a", "reason": str(e)}
    except Fail as e:
        result = {"status": "fail", "reason": str(e)}
    except Exception as e:  # a client error is the scenario's failure
        traceback.print_exc(file=sys.stderr)
        result = {"status": "fail", "reason": "%s: %s" % (type(e).__name__, e)}
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter shutdown: a client stuck in native code (a
    # librdkafka handle that does not terminate) must not hang the run.
    os._exit(0)
