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
import threading
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

# group.split (compat/split_test.go): two members at once over a
# 4-partition topic; SPLIT_COUNT records, value "i" to partition i % 4,
# written once both members hold a part of the topic.
SPLIT_PARTITIONS = 4
SPLIT_COUNT = 200
SPLIT_SESSION_MS = 30000


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


def split_group(topic):
    return topic + "-group"


def valid_split(sets):
    """Why two members' assignments are not yet a split of the topic:
    both non-empty, disjoint and together every partition; or None."""
    owner = {}
    for m, ps in enumerate(sets):
        if not ps:
            return "member %d has no partitions (assignments %s)" % (m, sets)
        for p in ps:
            if p in owner:
                return "partition %d assigned to members %d and %d (assignments %s)" % (p, owner[p], m, sets)
            owner[p] = m
    for p in range(SPLIT_PARTITIONS):
        if p not in owner:
            return "partition %d assigned to neither member (assignments %s)" % (p, sets)
    return None


class SplitAssign:
    """Each member's current assignment as its client reports it
    (assigned, revoked, lost), and how often it changed."""

    def __init__(self):
        self.lock = threading.Lock()
        self.parts = [set(), set()]
        self.changes = 0

    def add(self, m, ps):
        with self.lock:
            for p in ps:
                if p not in self.parts[m]:
                    self.parts[m].add(p)
                    self.changes += 1

    def remove(self, m, ps):
        with self.lock:
            for p in ps:
                if p in self.parts[m]:
                    self.parts[m].discard(p)
                    self.changes += 1

    def snapshot(self):
        with self.lock:
            return [sorted(ps) for ps in self.parts], self.changes

    def wait_split(self, timeout=45.0):
        """Waits until the members split the topic; returns the
        assignments and the change count at that point."""
        got = []

        def cond():
            got[:] = [self.snapshot()]
            return valid_split(got[0][0])
        wait_for("wait for both members to hold a part of the topic", cond, timeout)
        return got[0]

    def still_split(self, sets, changes):
        now, n = self.snapshot()
        if n != changes:
            raise Fail("the group rebalanced while consuming: assignments %s when the records were written, "
                       "%s at the end (%d changes)" % (sets, now, n - changes))


class SplitTally:
    """What both members processed and committed."""

    def __init__(self):
        self.lock = threading.Lock()
        self.seen = {}
        self.read = [{}, {}]
        self.committed = 0

    def record(self, m, partition, value):
        with self.lock:
            self.seen[value] = self.seen.get(value, 0) + 1
            self.read[m][partition] = self.read[m].get(partition, 0) + 1

    def commit(self, n):
        with self.lock:
            self.committed += n

    def wait_committed(self, errors, timeout=45.0):
        def cond():
            if errors:
                raise Fail(errors[0])
            with self.lock:
                c = self.committed
            return None if c >= SPLIT_COUNT else "%d of %d processed and committed" % (c, SPLIT_COUNT)
        wait_for("wait for every record to be processed and committed", cond, timeout)

    def check(self, assigned):
        """Each member read a non-empty set of partitions within its
        assignment, the sets are disjoint, every record was read once."""
        with self.lock:
            note = []
            for m, parts in enumerate(self.read):
                if not parts:
                    raise Fail("member %d read nothing (assigned %s)" % (m, assigned[m]))
                for p, n in parts.items():
                    if p not in assigned[m]:
                        raise Fail("member %d read %d records of partition %d, outside its assignment %s"
                                   % (m, n, p, assigned[m]))
                    if self.read[1 - m].get(p):
                        raise Fail("partition %d read by both members (%d and %d records) without a rebalance"
                                   % (p, self.read[0][p], self.read[1][p]))
                note.append("member %d read partitions %s" % (m, ",".join(str(p) for p in sorted(parts))))
            want = {str(i) for i in range(SPLIT_COUNT)}
            for v in self.seen:
                if v not in want:
                    raise Fail("read a record %r that was not written" % v)
            for i in range(SPLIT_COUNT):
                n = self.seen.get(str(i), 0)
                if n != 1:
                    raise Fail("record %d read %d times across the two members" % (i, n))
            return "; ".join(note)


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
