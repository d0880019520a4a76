"""The scenarios through confluent-kafka for Python (librdkafka).

Run by the compat runner with /usr/bin/python3, which sees Debian's
python3-confluent-kafka: --bootstrap, --strict, --scenario, --topic.
"""

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from confluent_kafka import (  # noqa: E402
    OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition, libversion)
from confluent_kafka.admin import (  # noqa: E402
    AdminClient, ConfigResource, NewPartitions, NewTopic)

import common  # noqa: E402
from common import Fail, NotApplicable  # noqa: E402

TIMEOUT = 20.0


_admins = {}


def admin(addr):
    """One AdminClient per address for the whole run: a client destroyed
    while its futures are pending fails them with _DESTROY."""
    if addr not in _admins:
        _admins[addr] = AdminClient({"bootstrap.servers": addr})
    return _admins[addr]


def wait_futures(futures, what):
    for name, f in futures.items():
        try:
            f.result(TIMEOUT)
        except Exception as e:
            raise Fail("%s %s: %s" % (what, name, e))


def create(addr, topic, partitions=1, config=None):
    wait_futures(admin(addr).create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config or {})],
        operation_timeout=TIMEOUT), "CreateTopics")
    # Kafka answers CreateTopics once its controller committed the topic;
    # its broker serves the partitions a moment later. The scenario starts
    # when every partition answers ListOffsets, as on a settled cluster.
    c = consumer(addr)
    try:
        def unserved():
            for p in range(partitions):
                try:
                    c.get_watermark_offsets(TopicPartition(topic, p), 2)
                except KafkaException as e:
                    return "partition %d: %s" % (p, e)
            return None
        common.wait_for("topic %s served after create" % topic, unserved)
    finally:
        c.close()


def produce(addr, msgs, **conf):
    """msgs: dicts of produce() arguments. Returns the delivery errors."""
    c = {"bootstrap.servers": addr, "linger.ms": 5}
    c.update(conf)
    p = Producer(c)
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)

    for m in msgs:
        while True:
            try:
                p.produce(on_delivery=on_delivery, **m)
                break
            except BufferError:
                p.poll(0.1)
    left = p.flush(60)
    if left:
        raise Fail("%d messages not delivered within 60s" % left)
    return errors


def produce_ok(addr, msgs, **conf):
    errors = produce(addr, msgs, **conf)
    if errors:
        raise Fail("delivery failed for %d messages, first: %s" % (len(errors), errors[0]))


# librdkafka 2.4 and later join groups with the KIP-848 consumer group
# protocol (group.protocol=consumer), the newer client's way; 1.7 speaks
# only the classic one. The session timeout is then the broker's
# (group.consumer.session.timeout.ms): the client may not set it.
KIP848 = libversion()[1] >= 0x020400ff


def group_conf(**conf):
    """The consumer settings of a group member, in the protocol this
    library speaks best."""
    if KIP848:
        conf.pop("session.timeout.ms", None)
        conf["group.protocol"] = "consumer"
    return conf


def consumer(addr, **conf):
    c = {"bootstrap.servers": addr, "group.id": "compat-unused", "enable.auto.commit": False,
         "auto.offset.reset": "earliest", "fetch.wait.max.ms": 200}
    c.update(conf)
    return Consumer(c)


def read(addr, topic, partition, n, offset=OFFSET_BEGINNING, **conf):
    c = consumer(addr, **conf)
    try:
        c.assign([TopicPartition(topic, partition, offset)])
        out = []
        deadline = time.time() + 60
        while len(out) < n:
            if time.time() > deadline:
                raise Fail("read %d of %d from partition %d" % (len(out), n, partition))
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                raise Fail("consume: %s" % m.error())
            out.append(m)
        return out
    finally:
        c.close()


def metadata(a):
    produce_ok(a.bootstrap, [{"topic": a.topic, "value": b"v"}])
    md = admin(a.bootstrap).list_topics(topic=a.topic, timeout=TIMEOUT)
    brokers = [(b.id, "%s:%d" % (b.host, b.port)) for b in md.brokers.values()]
    if brokers != [(1, a.bootstrap)]:
        raise Fail("brokers %s, want node 1 at %s" % (brokers, a.bootstrap))
    t = md.topics.get(a.topic)
    if t is None or t.error is not None or len(t.partitions) != 1 or t.partitions[0].leader != 1:
        raise Fail("topic %s: %s, want one partition led by node 1" % (a.topic, t and t.error))


def partitions(addr, topic):
    # All topics, not topic=...: librdkafka's admin handle asks for a named
    # topic with auto-creation allowed, which would create it again.
    t = admin(addr).list_topics(timeout=TIMEOUT).topics.get(topic)
    if t is None:
        return None
    if t.error is not None:
        return t.error
    return len(t.partitions)


def topics_admin(a):
    # Kafka's brokers learn of a committed admin change a moment after the
    # request returns, so each step is polled until the metadata shows it.
    create(a.bootstrap, a.topic, 3)
    common.wait_for("after create: partitions",
                    lambda: None if partitions(a.bootstrap, a.topic) == 3 else partitions(a.bootstrap, a.topic))
    wait_futures(admin(a.bootstrap).create_partitions([NewPartitions(a.topic, 5)]), "CreatePartitions")
    common.wait_for("after CreatePartitions: partitions",
                    lambda: None if partitions(a.bootstrap, a.topic) == 5 else partitions(a.bootstrap, a.topic))
    wait_futures(admin(a.bootstrap).delete_topics([a.topic], operation_timeout=TIMEOUT), "DeleteTopics")

    def gone():
        got = partitions(a.bootstrap, a.topic)
        if got is None or (isinstance(got, KafkaError) and got.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            return None
        return got
    common.wait_for("topic gone after delete", gone)


def produce_codec(codec):
    def run(a):
        create(a.bootstrap, a.topic, 1)
        msgs = [{"topic": a.topic, "partition": 0, "key": common.produce_key(i).encode(),
                 "value": common.produce_value(i).encode(), "headers": [("i", str(i).encode())]}
                for i in range(common.PRODUCE_COUNT)]
        # A long linger makes one batch: librdkafka sends a batch that
        # does not shrink (a lone first record) uncompressed.
        produce_ok(a.bootstrap, msgs, **{"compression.type": codec, "linger.ms": 200})
        got = read(a.bootstrap, a.topic, 0, common.PRODUCE_COUNT)
        for i, m in enumerate(got):
            if (m.offset() != i or m.key() != common.produce_key(i).encode()
                    or m.value() != common.produce_value(i).encode()
                    or m.headers() != [("i", str(i).encode())]):
                raise Fail("message %d: offset %d key %r value %r headers %r"
                           % (i, m.offset(), m.key(), m.value(), m.headers()))
    return run


def order_key(a):
    create(a.bootstrap, a.topic, 4)
    seq, msgs = {}, []
    for i in range(common.ORDER_COUNT):
        k = common.produce_key(i % common.ORDER_KEYS)
        msgs.append({"topic": a.topic, "key": k.encode(), "value": str(seq.get(k, 0)).encode()})
        seq[k] = seq.get(k, 0) + 1
    produce_ok(a.bootstrap, msgs)
    records = []
    for p in range(4):
        c = consumer(a.bootstrap)
        lo, hi = c.get_watermark_offsets(TopicPartition(a.topic, p), TIMEOUT)
        c.close()
        records += [(m.key().decode(), m.value().decode(), p) for m in read(a.bootstrap, a.topic, p, hi - lo)]
    common.check_order(records)


def group_resume(a):
    create(a.bootstrap, a.topic, 2)
    n = 100
    produce_ok(a.bootstrap, [{"topic": a.topic, "partition": i % 2, "value": str(i).encode()} for i in range(n)])
    seen = {}

    def member(limit):
        c = consumer(a.bootstrap, **group_conf(**{"group.id": a.topic + "-group", "session.timeout.ms": 10000}))
        try:
            c.subscribe([a.topic])
            read_ = 0
            deadline = time.time() + 40
            while read_ < limit:
                if time.time() > deadline:
                    raise Fail("group member read %d of %d" % (read_, limit))
                m = c.poll(0.5)
                if m is None:
                    continue
                if m.error():
                    raise Fail("group consume: %s" % m.error())
                seen[m.value()] = seen.get(m.value(), 0) + 1
                read_ += 1
                c.commit(message=m, asynchronous=False)
        finally:
            c.close()  # leaves the group
    member(n // 2)
    member(n - n // 2)
    for i in range(n):
        if seen.get(str(i).encode()) != 1:
            raise Fail("record %d read %s times across the two members" % (i, seen.get(str(i).encode())))


def group_split(a):
    """Two Consumers of one group, one thread each (rebalance callbacks
    run inside a consumer's poll), with librdkafka's default assignors
    (range, roundrobin), or the broker's (KIP-848) from librdkafka 2.4."""
    create(a.bootstrap, a.topic, common.SPLIT_PARTITIONS)
    group = common.split_group(a.topic)
    asg, tally = common.SplitAssign(), common.SplitTally()
    stop = threading.Event()
    errors = []

    def member(m):
        c = None
        try:
            c = consumer(a.bootstrap, **group_conf(**{"group.id": group, "client.id": "%s-%d" % (group, m),
                                                      "session.timeout.ms": common.SPLIT_SESSION_MS}))

            def parts(ps):
                return [tp.partition for tp in ps if tp.topic == a.topic]
            c.subscribe([a.topic], on_assign=lambda _, ps: asg.add(m, parts(ps)),
                        on_revoke=lambda _, ps: asg.remove(m, parts(ps)),
                        on_lost=lambda _, ps: asg.remove(m, parts(ps)))
            while not stop.is_set():
                msg = c.poll(0.2)
                if msg is None:
                    continue
                if msg.error():
                    raise Fail("consume: %s" % msg.error())
                tally.record(m, msg.partition(), msg.value().decode())
                c.commit(message=msg, asynchronous=False)
                tally.commit(1)
        except Exception as e:  # the member's failure is the scenario's
            errors.append("member %d: %s: %s" % (m, type(e).__name__, e))
        finally:
            if c is not None:
                c.close()  # leaves the group

    threads = [threading.Thread(target=member, args=(m,), daemon=True) for m in range(2)]
    for t in threads:
        t.start()
    try:
        sets, changes = asg.wait_split()
        produce_ok(a.bootstrap, [{"topic": a.topic, "partition": i % common.SPLIT_PARTITIONS, "value": str(i).encode()}
                                 for i in range(common.SPLIT_COUNT)])
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
    note = tally.check(sets)
    if KIP848:
        note = "group.protocol=consumer; " + note
    return note


def idempotent(a):
    create(a.bootstrap, a.topic, 1)
    produce_ok(a.bootstrap, [{"topic": a.topic, "value": str(i).encode()} for i in range(common.PRODUCE_COUNT)],
               **{"enable.idempotence": True})
    got = read(a.bootstrap, a.topic, 0, common.PRODUCE_COUNT)
    for i, m in enumerate(got):
        if m.value() != str(i).encode():
            raise Fail("offset %d holds %r" % (i, m.value()))


def txn(a):
    create(a.bootstrap, a.topic, 1)
    p = Producer({"bootstrap.servers": a.bootstrap, "transactional.id": a.topic + "-txn", "linger.ms": 5})
    p.init_transactions(TIMEOUT)
    for t, commit in enumerate((True, False, True)):
        p.begin_transaction()
        for i in range(10):
            p.produce(a.topic, value=("t%d-%d" % (t, i)).encode(), partition=0)
        p.flush(TIMEOUT)
        if commit:
            p.commit_transaction(TIMEOUT)
        else:
            p.abort_transaction(TIMEOUT)
    c = consumer(a.bootstrap, **{"isolation.level": "read_committed"})
    c.assign([TopicPartition(a.topic, 0, OFFSET_BEGINNING)])
    got = []
    deadline = time.time() + 5
    while time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value().decode())
    c.close()
    if got != common.committed_values():
        raise Fail("read_committed read %s, want %s" % (got, common.committed_values()))


def listoffsets_time(a):
    create(a.bootstrap, a.topic, 1)
    produce_ok(a.bootstrap, [{"topic": a.topic, "partition": 0, "value": str(i).encode(),
                              "timestamp": common.TIME_BASE + i * 1000} for i in range(10)])
    c = consumer(a.bootstrap)
    try:
        for at, want in ((common.TIME_BASE + 3500, 4), (common.TIME_BASE + 3000, 3)):
            got = c.offsets_for_times([TopicPartition(a.topic, 0, at)], TIMEOUT)[0]
            if got.error or got.offset != want:
                raise Fail("offsets_for_times(%d): %s, want %d" % (at, got, want))
        lo, hi = c.get_watermark_offsets(TopicPartition(a.topic, 0), TIMEOUT)
        if (lo, hi) != (0, 10):
            raise Fail("watermarks (%d, %d), want (0, 10)" % (lo, hi))
    finally:
        c.close()


def describe(addr, topic):
    res = ConfigResource("topic", topic)
    fs = admin(addr).describe_configs([res], request_timeout=TIMEOUT)
    entries = list(fs.values())[0].result(TIMEOUT)
    return {k: v.value for k, v in entries.items()}


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
    # confluent-kafka 1.7 has AlterConfigs only (incremental came in 2.2).
    res = ConfigResource("topic", a.topic, set_config={"retention.ms": "987654321"})
    wait_futures(admin(a.bootstrap).alter_configs([res], request_timeout=TIMEOUT), "AlterConfigs")
    want_configs(a.bootstrap, a.topic, {"retention.ms": "987654321"})
    return "AlterConfigs (key 33): this version has no IncrementalAlterConfigs"


def deleterecords(a):
    adm = admin(a.bootstrap)
    if not hasattr(adm, "delete_records"):
        raise NotApplicable("confluent-kafka %s has no delete_records (added in 2.4)" % version())
    create(a.bootstrap, a.topic, 1)
    produce_ok(a.bootstrap, [{"topic": a.topic, "partition": 0, "value": str(i).encode()} for i in range(10)])
    futures = adm.delete_records([TopicPartition(a.topic, 0, 4)], request_timeout=TIMEOUT)
    for tp, f in futures.items():
        try:
            res = f.result(TIMEOUT)
        except Exception as e:
            raise Fail("DeleteRecords %s: %s" % (tp, e))
        low = getattr(res, "low_watermark", None)
        if low != 4:
            raise Fail("DeleteRecords to 4 answered low watermark %s" % low)
    got = read(a.bootstrap, a.topic, 0, 6)
    if got[0].offset() != 4:
        raise Fail("first record from the beginning at %d, want 4" % got[0].offset())
    c = consumer(a.bootstrap)
    try:
        lo, hi = c.get_watermark_offsets(TopicPartition(a.topic, 0), TIMEOUT)
    finally:
        c.close()
    if (lo, hi) != (4, 10):
        raise Fail("watermarks (%d, %d) after DeleteRecords to 4, want (4, 10)" % (lo, hi))


def version():
    from confluent_kafka import version as v
    return v()[0]


def big_record(a):
    create(a.bootstrap, a.topic, 1, {"max.message.bytes": str(common.BIG_TOPIC_MAX)})
    big, want = common.big_value()
    produce_ok(a.bootstrap, [{"topic": a.topic, "partition": 0, "key": b"big", "value": big}],
               **{"message.max.bytes": common.BIG_TOPIC_MAX + 1000})
    got = read(a.bootstrap, a.topic, 0, 1)[0].value()
    import hashlib
    if hashlib.sha256(got).hexdigest() != want:
        raise Fail("read back %d bytes with another hash" % len(got))


def bulk(a):
    create(a.bootstrap, a.topic, 3)
    produce_ok(a.bootstrap, [{"topic": a.topic, "value": common.bulk_value(i).encode()}
                             for i in range(common.BULK_COUNT)], **{"queue.buffering.max.messages": 200000})
    c = consumer(a.bootstrap)
    c.assign([TopicPartition(a.topic, p, OFFSET_BEGINNING) for p in range(3)])
    values = []
    deadline = time.time() + 120
    try:
        while len(values) < common.BULK_COUNT and time.time() < deadline:
            for m in c.consume(10000, 0.5):
                if m.error():
                    raise Fail("consume: %s" % m.error())
                values.append(m.value())
    finally:
        c.close()
    if len(values) != common.BULK_COUNT or common.bulk_sum(values) != common.want_bulk_sum():
        raise Fail("read %d records with checksum %d, want %d with %d"
                   % (len(values), common.bulk_sum(values), common.BULK_COUNT, common.want_bulk_sum()))
    return "checksum %d" % common.want_bulk_sum()


def unknown_topic(a):
    errors = produce(a.strict, [{"topic": a.topic, "value": b"v"}],
                     **{"message.timeout.ms": 20000, "topic.metadata.propagation.max.ms": 3000})
    codes = {KafkaError._UNKNOWN_TOPIC, KafkaError.UNKNOWN_TOPIC_OR_PART}
    if len(errors) != 1 or errors[0].code() not in codes:
        raise Fail("produce to an unknown topic with auto-create off: %s, want an unknown-topic error" % errors)
    return str(errors[0])


def too_large(a):
    create(a.bootstrap, a.topic, 1, {"max.message.bytes": str(common.SMALL_TOPIC_MAX)})
    big, _ = common.big_value()
    errors = produce(a.bootstrap, [{"topic": a.topic, "partition": 0, "value": big[:common.TOO_LARGE_VALUE]}],
                     **{"message.timeout.ms": 20000})
    if len(errors) != 1 or errors[0].code() != KafkaError.MSG_SIZE_TOO_LARGE:
        raise Fail("produce %d bytes to max.message.bytes=%d: %s, want MESSAGE_TOO_LARGE"
                   % (common.TOO_LARGE_VALUE, common.SMALL_TOPIC_MAX, errors))


def offset_past_end(a):
    create(a.bootstrap, a.topic, 1)
    produce_ok(a.bootstrap, [{"topic": a.topic, "partition": 0, "value": str(i).encode()} for i in range(10)])
    got = read(a.bootstrap, a.topic, 0, 10, offset=100)
    if got[0].offset() != 0:
        raise Fail("after reset to earliest the first record is at %d" % got[0].offset())
    return "OFFSET_OUT_OF_RANGE at 100, reset to earliest (0)"


def topic_deleted(a):
    create(a.bootstrap, a.topic, 1)
    produce_ok(a.bootstrap, [{"topic": a.topic, "partition": 0, "value": str(i).encode()} for i in range(10)])
    c = consumer(a.bootstrap, **({"debug": os.environ["COMPAT_DEBUG"]} if os.environ.get("COMPAT_DEBUG") else {}))
    c.assign([TopicPartition(a.topic, 0, OFFSET_BEGINNING)])
    n = 0
    deadline = time.time() + 30
    while n < 10:
        if time.time() > deadline:
            raise Fail("read %d of 10 before the delete" % n)
        m = c.poll(0.5)
        if m is not None and not m.error():
            n += 1
    wait_futures(admin(a.bootstrap).delete_topics([a.topic], operation_timeout=TIMEOUT), "DeleteTopics")
    seen = None
    deadline = time.time() + 10
    while time.time() < deadline and seen is None:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            seen = m.error()
        else:
            raise Fail("read offset %d after the topic was deleted" % m.offset())
    closer = threading.Thread(target=c.close, daemon=True)
    closer.start()
    closer.join(10)
    if closer.is_alive():
        raise Fail("Consumer.close() did not return within 10s after the topic was deleted"
                   " (librdkafka spins terminating its bootstrap connection; %s)"
                   % ("reported %s" % seen if seen else "no error reported before"))
    if seen is not None:
        return "consumer reported: %s" % seen
    return "consumer stayed silent (no records, no error) and closed"


def share_consume(a):
    """A share group (KIP-932) through librdkafka's ShareConsumer, as the
    Java client's share.consume: the group's share.auto.offset.reset set
    to earliest (a GROUP config), every record delivered once,
    acknowledged (explicit mode) and committed."""
    try:
        from confluent_kafka import AcknowledgeType, ShareConsumer
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ResourceType
    except ImportError:
        raise NotApplicable("confluent-kafka %s has no ShareConsumer (KIP-932)" % version())
    group = a.topic + "-share"
    create(a.bootstrap, a.topic, 2)
    produce_ok(a.bootstrap, [{"topic": a.topic, "partition": i % 2, "value": str(i).encode()} for i in range(20)])
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    wait_futures(admin(a.bootstrap).incremental_alter_configs([res]), "IncrementalAlterConfigs of the group")
    c = ShareConsumer({"bootstrap.servers": a.bootstrap, "group.id": group,
                       "share.acknowledgement.mode": "explicit"})
    seen = {}
    try:
        c.subscribe([a.topic])
        deadline = time.time() + 60
        while len(seen) < 20:
            if time.time() > deadline:
                raise Fail("the share consumer read %d of 20 records in 60s" % len(seen))
            for m in c.poll(0.5):
                if m.error():
                    raise Fail("share consumer: %s" % m.error())
                v = m.value().decode()
                seen[v] = seen.get(v, 0) + 1
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            for tp, err in c.commit_sync(TIMEOUT).items():
                if err is not None:
                    raise Fail("acknowledging %s: %s" % (tp, err))
    finally:
        c.close()
    again = [v for v, n in seen.items() if n != 1]
    if again:
        raise Fail("records delivered more than once: %s" % sorted(again))
    if sorted(seen, key=int) != [str(i) for i in range(20)]:
        raise Fail("records read %s, want 0-19" % sorted(seen, key=int))
    return "librdkafka %s" % libversion()[0]


SCENARIOS = {
    "share.consume": share_consume,
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
