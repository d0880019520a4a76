"""The scenarios through kafka-python (pure Python).

Run by the compat runner with /usr/bin/python3, which sees Debian's
python3-kafka (2.0.2) and the codec modules python3-snappy, python3-lz4
and python3-zstandard: --bootstrap, --strict, --scenario, --topic.
"""

import hashlib
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from kafka import (  # noqa: E402
    ConsumerRebalanceListener, KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition)
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic  # noqa: E402
from kafka.errors import KafkaError, KafkaTimeoutError, MessageSizeTooLargeError  # noqa: E402

import common  # noqa: E402
from common import Fail, NotApplicable  # noqa: E402

TIMEOUT = 20


def admin(addr):
    return KafkaAdminClient(bootstrap_servers=addr, request_timeout_ms=TIMEOUT * 1000)


def check_codes(what, pairs):
    """pairs: (name, error code) from a response."""
    for name, code in pairs:
        if code != 0:
            raise Fail("%s %s: error code %d" % (what, name, code))


def create(addr, topic, partitions=1, configs=None):
    a = admin(addr)
    try:
        r = a.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs or {})], timeout_ms=TIMEOUT * 1000)
        check_codes("CreateTopics", [(t[0], t[1]) for t in r.topic_errors])
    finally:
        a.close()
    # Kafka answers CreateTopics once its controller committed the topic;
    # its broker serves the partitions a moment later. The scenario starts
    # when every partition answers ListOffsets, as on a settled cluster.
    c = consumer(addr)
    try:
        def unserved():
            try:
                c.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
            except KafkaError as e:
                return repr(e)
            return None
        common.wait_for("topic %s served after create" % topic, unserved)
    finally:
        c.close()


def producer(addr, **kw):
    conf = dict(bootstrap_servers=addr, acks="all", linger_ms=5, request_timeout_ms=TIMEOUT * 1000)
    conf.update(kw)
    return KafkaProducer(**conf)


def send_all(p, msgs):
    """msgs: dicts of send() arguments; waits for every acknowledgement."""
    futures = [p.send(**m) for m in msgs]
    p.flush(60)
    for f in futures:
        f.get(timeout=TIMEOUT)


def consumer(addr, **kw):
    conf = dict(bootstrap_servers=addr, enable_auto_commit=False, auto_offset_reset="earliest",
                fetch_max_wait_ms=200, request_timeout_ms=TIMEOUT * 1000 + 5000)
    conf.update(kw)
    return KafkaConsumer(**conf)


def read(addr, topic, partitions, n, seek=None, **kw):
    c = consumer(addr, **kw)
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        c.assign(tps)
        if seek is None:
            c.seek_to_beginning(*tps)
        else:
            for tp in tps:
                c.seek(tp, seek)
        out = []
        deadline = time.time() + 120
        while len(out) < n:
            if time.time() > deadline:
                raise Fail("read %d of %d" % (len(out), n))
            for recs in c.poll(timeout_ms=500).values():
                out.extend(recs)
        return out
    finally:
        c.close()


def metadata(a):
    p = producer(a.bootstrap)
    send_all(p, [{"topic": a.topic, "value": b"v"}])
    p.close()
    adm = admin(a.bootstrap)
    try:
        cluster = adm.describe_cluster()
    finally:
        adm.close()
    brokers = [(b["node_id"], "%s:%d" % (b["host"], b["port"])) for b in cluster["brokers"]]
    if brokers != [(1, a.bootstrap)]:
        raise Fail("brokers %s, want node 1 at %s" % (brokers, a.bootstrap))
    c = consumer(a.bootstrap)
    parts = c.partitions_for_topic(a.topic)
    c.close()
    if parts != {0}:
        raise Fail("partitions of %s: %s, want {0}" % (a.topic, parts))


def count_partitions(addr, topic):
    c = consumer(addr)
    try:
        c.topics()  # refreshes the metadata of every topic
        return c.partitions_for_topic(topic)
    finally:
        c.close()


def topics_admin(a):
    # Polled: Kafka's brokers learn of a committed admin change a moment
    # after the request returns.
    def has(n):
        got = count_partitions(a.bootstrap, a.topic)
        return None if got is not None and len(got) == n else "partitions %s, want %d" % (got, n)
    create(a.bootstrap, a.topic, 3)
    common.wait_for("after create", lambda: has(3))
    adm = admin(a.bootstrap)
    try:
        r = adm.create_partitions({a.topic: NewPartitions(5)}, timeout_ms=TIMEOUT * 1000)
        check_codes("CreatePartitions", [(t[0], t[1]) for t in r.topic_errors])
        common.wait_for("after CreatePartitions", lambda: has(5))
        r = adm.delete_topics([a.topic], timeout_ms=TIMEOUT * 1000)
        check_codes("DeleteTopics", r.topic_error_codes)
    finally:
        adm.close()
    common.wait_for("topic gone after delete",
                    lambda: None if count_partitions(a.bootstrap, a.topic) is None else "listed")


def produce_codec(codec):
    def run(a):
        create(a.bootstrap, a.topic, 1)
        # A long linger makes large batches: kafka-python sends a batch
        # that compression does not shrink uncompressed.
        p = producer(a.bootstrap, compression_type=None if codec == "none" else codec, linger_ms=200)
        send_all(p, [{"topic": a.topic, "partition": 0, "key": common.produce_key(i).encode(),
                      "value": common.produce_value(i).encode(), "headers": [("i", str(i).encode())]}
                     for i in range(common.PRODUCE_COUNT)])
        p.close()
        got = read(a.bootstrap, a.topic, [0], common.PRODUCE_COUNT)
        for i, m in enumerate(got):
            if (m.offset != i or m.key != common.produce_key(i).encode()
                    or m.value != common.produce_value(i).encode() or list(m.headers) != [("i", str(i).encode())]):
                raise Fail("message %d: offset %d key %r value %r headers %r" % (i, m.offset, m.key, m.value, m.headers))
    return run


def order_key(a):
    create(a.bootstrap, a.topic, 4)
    seq, msgs = {}, []
    for i in range(common.ORDER_COUNT):
        k = common.produce_key(i % common.ORDER_KEYS)
        msgs.append({"topic": a.topic, "key": k.encode(), "value": str(seq.get(k, 0)).encode()})
        seq[k] = seq.get(k, 0) + 1
    p = producer(a.bootstrap)
    send_all(p, msgs)
    p.close()
    got = read(a.bootstrap, a.topic, range(4), common.ORDER_COUNT)
    got.sort(key=lambda m: (m.partition, m.offset))
    common.check_order([(m.key.decode(), m.value.decode(), m.partition) for m in got])


def group_resume(a):
    create(a.bootstrap, a.topic, 2)
    n = 100
    p = producer(a.bootstrap)
    send_all(p, [{"topic": a.topic, "partition": i % 2, "value": str(i).encode()} for i in range(n)])
    p.close()
    seen = {}

    def member(limit):
        c = consumer(a.bootstrap, group_id=a.topic + "-group", session_timeout_ms=10000, heartbeat_interval_ms=1000)
        try:
            c.subscribe([a.topic])
            got = 0
            deadline = time.time() + 40
            while got < limit:
                if time.time() > deadline:
                    raise Fail("group member read %d of %d" % (got, limit))
                for recs in c.poll(timeout_ms=500, max_records=limit - got).values():
                    for m in recs:
                        seen[m.value] = seen.get(m.value, 0) + 1
                        got += 1
                c.commit()
        finally:
            c.close(autocommit=False)  # leaves the group
    member(n // 2)
    member(n - n // 2)
    for i in range(n):
        if seen.get(str(i).encode()) != 1:
            raise Fail("record %d read %s times across the two members" % (i, seen.get(str(i).encode())))


class SplitListener(ConsumerRebalanceListener):
    """Tracks one group.split member's assignment through kafka-python's
    rebalance callbacks (eager: revoke all, then assign anew)."""

    def __init__(self, topic, m, asg):
        self.topic, self.m, self.asg = topic, m, asg

    def on_partitions_revoked(self, revoked):
        self.asg.remove(self.m, [tp.partition for tp in revoked if tp.topic == self.topic])

    def on_partitions_assigned(self, assigned):
        self.asg.add(self.m, [tp.partition for tp in assigned if tp.topic == self.topic])


def group_split(a):
    """Two KafkaConsumers of one group, one thread each (a consumer is not
    thread-safe; each completes its rebalances inside its own poll), with
    kafka-python's default assignors (range, roundrobin)."""
    create(a.bootstrap, a.topic, common.SPLIT_PARTITIONS)
    group = common.split_group(a.topic)
    asg, tally = common.SplitAssign(), common.SplitTally()
    stop = threading.Event()
    errors = []

    def member(m):
        c = None
        try:
            c = consumer(a.bootstrap, group_id=group, client_id="%s-%d" % (group, m),
                         session_timeout_ms=common.SPLIT_SESSION_MS, heartbeat_interval_ms=1000,
                         request_timeout_ms=common.SPLIT_SESSION_MS + 10000)
            c.subscribe([a.topic], listener=SplitListener(a.topic, m, asg))
            while not stop.is_set():
                n = 0
                for recs in c.poll(timeout_ms=200).values():
                    for r in recs:
                        tally.record(m, r.partition, r.value.decode())
                        n += 1
                if n:
                    c.commit()  # the positions after what was just processed
                    tally.commit(n)
        except Exception as e:  # the member's failure is the scenario's
            errors.append("member %d: %s: %s" % (m, type(e).__name__, e))
        finally:
            if c is not None:
                c.close(autocommit=False)  # leaves the group

    threads = [threading.Thread(target=member, args=(m,), daemon=True) for m in range(2)]
    for t in threads:
        t.start()
    try:
        sets, changes = asg.wait_split()
        p = producer(a.bootstrap)
        send_all(p, [{"topic": a.topic, "partition": i % common.SPLIT_PARTITIONS, "value": str(i).encode()}
                     for i in range(common.SPLIT_COUNT)])
        p.close()
        tally.wait_committed(errors)
        asg.still_split(sets, changes)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    if any(t.is_alive() for t in threads):
        raise Fail("a member did not stop within 30s")
    if errors:
        raise Fail(errors[0])
    return tally.check(sets)


def idempotent(a):
    raise NotApplicable("kafka-python 2.0.2 has no idempotent producer")


def txn(a):
    raise NotApplicable("kafka-python 2.0.2 has no transactions")


def listoffsets_time(a):
    create(a.bootstrap, a.topic, 1)
    p = producer(a.bootstrap)
    send_all(p, [{"topic": a.topic, "partition": 0, "value": str(i).encode(),
                  "timestamp_ms": common.TIME_BASE + i * 1000} for i in range(10)])
    p.close()
    c = consumer(a.bootstrap)
    tp = TopicPartition(a.topic, 0)
    try:
        for at, want in ((common.TIME_BASE + 3500, 4), (common.TIME_BASE + 3000, 3)):
            got = c.offsets_for_times({tp: at})[tp]
            if got is None or got.offset != want or got.timestamp != common.TIME_BASE + want * 1000:
                raise Fail("offsets_for_times(%d): %s, want offset %d stamped %d"
                           % (at, got, want, common.TIME_BASE + want * 1000))
        lo, hi = c.beginning_offsets([tp])[tp], c.end_offsets([tp])[tp]
        if (lo, hi) != (0, 10):
            raise Fail("beginning/end offsets (%d, %d), want (0, 10)" % (lo, hi))
    finally:
        c.close()


def describe(addr, topic):
    adm = admin(addr)
    try:
        rs = adm.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    finally:
        adm.close()
    res = rs[0].resources[0]
    if res[0] != 0:
        raise Fail("DescribeConfigs %s: error code %d %s" % (topic, res[0], res[1]))
    return {e[0]: e[1] for e in res[4]}


def want_configs(addr, topic, want):
    # Polled: Kafka's brokers learn of a committed config change a moment
    # after the request returns.
    def differs():
        got = describe(addr, topic)
        for k, v in want.items():
            if got.get(k) != v:
                return "%s=%r, want %r" % (k, got.get(k), v)
        return None
    common.wait_for("DescribeConfigs %s" % topic, differs)


def configs_describe(a):
    create(a.bootstrap, a.topic, 1, {"retention.ms": "123456789"})
    want_configs(a.bootstrap, a.topic, {"retention.ms": "123456789", "cleanup.policy": "delete"})


def configs_alter(a):
    create(a.bootstrap, a.topic, 1)
    adm = admin(a.bootstrap)
    try:
        r = adm.alter_configs([ConfigResource(ConfigResourceType.TOPIC, a.topic, configs={"retention.ms": "987654321"})])
    finally:
        adm.close()
    for res in r.resources:
        if res[0] != 0:
            raise Fail("AlterConfigs: error code %d %s" % (res[0], res[1]))
    want_configs(a.bootstrap, a.topic, {"retention.ms": "987654321"})
    return "AlterConfigs (key 33): kafka-python 2.0.2 has no IncrementalAlterConfigs"


def deleterecords(a):
    raise NotApplicable("kafka-python 2.0.2 has no DeleteRecords")


def big_record(a):
    create(a.bootstrap, a.topic, 1, {"max.message.bytes": str(common.BIG_TOPIC_MAX)})
    big, want = common.big_value()
    p = producer(a.bootstrap, max_request_size=common.BIG_TOPIC_MAX + 1000)
    send_all(p, [{"topic": a.topic, "partition": 0, "key": b"big", "value": big}])
    p.close()
    got = read(a.bootstrap, a.topic, [0], 1)[0].value
    if hashlib.sha256(got).hexdigest() != want:
        raise Fail("read back %d bytes with another hash" % len(got))


def bulk(a):
    create(a.bootstrap, a.topic, 3)
    p = producer(a.bootstrap, batch_size=64 * 1024)
    futures = [p.send(a.topic, value=common.bulk_value(i).encode()) for i in range(common.BULK_COUNT)]
    p.flush(120)
    for f in futures:
        f.get(timeout=TIMEOUT)
    p.close()
    got = read(a.bootstrap, a.topic, range(3), common.BULK_COUNT)
    values = [m.value for m in got]
    if len(values) != common.BULK_COUNT or common.bulk_sum(values) != common.want_bulk_sum():
        raise Fail("read %d records with checksum %d, want %d with %d"
                   % (len(values), common.bulk_sum(values), common.BULK_COUNT, common.want_bulk_sum()))
    return "checksum %d" % common.want_bulk_sum()


def unknown_topic(a):
    # kafka-python waits for the topic's metadata up to max_block_ms and
    # then times out; UNKNOWN_TOPIC_OR_PARTITION shows only in its log.
    p = producer(a.strict, max_block_ms=5000)
    try:
        p.send(a.topic, value=b"v").get(timeout=TIMEOUT)
    except KafkaTimeoutError as e:
        return "KafkaTimeoutError: %s (its design: it waits for the topic)" % e
    finally:
        p.close()
    raise Fail("produced to an unknown topic with auto-create off")


def too_large(a):
    create(a.bootstrap, a.topic, 1, {"max.message.bytes": str(common.SMALL_TOPIC_MAX)})
    big, _ = common.big_value()
    p = producer(a.bootstrap)
    try:
        p.send(a.topic, value=big[:common.TOO_LARGE_VALUE], partition=0).get(timeout=TIMEOUT)
    except MessageSizeTooLargeError:
        return ""
    finally:
        p.close()
    raise Fail("produced %d bytes to max.message.bytes=%d" % (common.TOO_LARGE_VALUE, common.SMALL_TOPIC_MAX))


def offset_past_end(a):
    create(a.bootstrap, a.topic, 1)
    p = producer(a.bootstrap)
    send_all(p, [{"topic": a.topic, "partition": 0, "value": str(i).encode()} for i in range(10)])
    p.close()
    got = read(a.bootstrap, a.topic, [0], 10, seek=100)
    if got[0].offset != 0:
        raise Fail("after reset to earliest the first record is at %d" % got[0].offset)
    return "OFFSET_OUT_OF_RANGE at 100, reset to earliest (0)"


def topic_deleted(a):
    create(a.bootstrap, a.topic, 1)
    p = producer(a.bootstrap)
    send_all(p, [{"topic": a.topic, "partition": 0, "value": str(i).encode()} for i in range(10)])
    p.close()
    c = consumer(a.bootstrap)
    tp = TopicPartition(a.topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    n = 0
    deadline = time.time() + 30
    while n < 10:
        if time.time() > deadline:
            raise Fail("read %d of 10 before the delete" % n)
        n += sum(len(r) for r in c.poll(timeout_ms=500).values())
    adm = admin(a.bootstrap)
    try:
        check_codes("DeleteTopics", adm.delete_topics([a.topic], timeout_ms=TIMEOUT * 1000).topic_error_codes)
    finally:
        adm.close()
    seen = None
    deadline = time.time() + 10
    while time.time() < deadline and seen is None:
        try:
            got = sum(len(r) for r in c.poll(timeout_ms=500).values())
        except Exception as e:  # the client's report of the deletion
            seen = e
            break
        if got:
            raise Fail("read %d records after the topic was deleted" % got)
    closer = threading.Thread(target=c.close, daemon=True)
    closer.start()
    closer.join(10)
    if closer.is_alive():
        raise Fail("KafkaConsumer.close() did not return within 10s after the topic was deleted")
    if seen is not None:
        return "consumer reported: %s: %s" % (type(seen).__name__, seen)
    return "consumer stayed silent (no records, no error) and closed"


SCENARIOS = {
    "metadata": metadata,
    "topics.admin": topics_admin,
    "order.key": order_key,
    "group.resume": group_resume,
    "group.split": group_split,
    "producer.idempotent": idempotent,
    "txn.read_committed": txn,
    "listoffsets.time": listoffsets_time,
    "configs.describe": configs_describe,
    "configs.alter": configs_alter,
    "deleterecords": deleterecords,
    "record.1mib": big_record,
    "bulk.100k": bulk,
    "edge.unknown_topic": unknown_topic,
    "edge.too_large": too_large,
    "edge.offset_past_end": offset_past_end,
    "edge.topic_deleted": topic_deleted,
}
for _codec in common.CODECS:
    SCENARIOS["produce." + _codec] = produce_codec(_codec)

if __name__ == "__main__":
    common.main(SCENARIOS)
