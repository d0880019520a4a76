"""The scenarios through aiokafka (asyncio, pure Python).

Run by the compat runner with compat/out/pyvenv/bin/python, where make
compat-deps installed aiokafka and cramjam (its snappy, lz4 and zstd
codecs) from PyPI, pinned by python/requirements.txt: --bootstrap,
--strict, --scenario, --topic. Each scenario is one coroutine run with
asyncio.run.
"""

import asyncio
import hashlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import aiokafka  # noqa: E402
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition  # noqa: E402
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete  # noqa: E402
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType  # noqa: E402
from aiokafka.errors import (  # noqa: E402
    KafkaError, KafkaTimeoutError, MessageSizeTooLargeError, UnknownTopicOrPartitionError)

import common  # noqa: E402
from common import Fail  # noqa: E402

TIMEOUT = 20


async def admin(addr):
    a = AIOKafkaAdminClient(bootstrap_servers=addr, request_timeout_ms=TIMEOUT * 1000)
    await a.start()
    return a


def check_codes(what, pairs):
    """pairs: (name, error code) from a response."""
    for name, code in pairs:
        if code != 0:
            raise Fail("%s %s: error code %d" % (what, name, code))


async def wait_for(what, cond, timeout=15.0):
    """Awaits cond every 100 ms until it returns None or timeout passes."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = await cond()
        if last is None:
            return
        await asyncio.sleep(0.1)
    raise Fail("%s: still %s after %.0fs" % (what, last, timeout))


async def create(addr, topic, partitions=1, configs=None):
    a = await admin(addr)
    try:
        r = await a.create_topics([NewTopic(topic, partitions, 1, topic_configs=configs or {})],
                                  timeout_ms=TIMEOUT * 1000)
        check_codes("CreateTopics", [(t[0], t[1]) for t in r.topic_errors])
    finally:
        await a.close()
    # Kafka answers CreateTopics once its controller committed the topic;
    # its broker serves the partitions a moment later. The scenario starts
    # when every partition answers ListOffsets, as on a settled cluster.
    c = await consumer(addr)
    try:
        async def unserved():
            try:
                await c.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
            except KafkaError as e:
                return repr(e)
            return None
        await wait_for("topic %s served after create" % topic, unserved)
    finally:
        await c.stop()


async def producer(addr, **kw):
    conf = dict(bootstrap_servers=addr, acks="all", linger_ms=5, request_timeout_ms=TIMEOUT * 1000)
    conf.update(kw)
    p = AIOKafkaProducer(**conf)
    await p.start()
    return p


async def send_all(p, msgs):
    """msgs: dicts of send() arguments; waits for every acknowledgement."""
    futures = [await p.send(**m) for m in msgs]
    await p.flush()
    for f in futures:
        await asyncio.wait_for(f, TIMEOUT)


async def consumer(addr, **kw):
    conf = dict(bootstrap_servers=addr, enable_auto_commit=False, auto_offset_reset="earliest",
                fetch_max_wait_ms=200, request_timeout_ms=TIMEOUT * 1000 + 5000)
    conf.update(kw)
    c = AIOKafkaConsumer(**conf)
    await c.start()
    return c


async def read(addr, topic, partitions, n, seek=None, **kw):
    c = await consumer(addr, **kw)
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        c.assign(tps)
        if seek is None:
            await c.seek_to_beginning(*tps)
        else:
            for tp in tps:
                c.seek(tp, seek)
        out = []
        deadline = time.time() + 120
        while len(out) < n:
            if time.time() > deadline:
                raise Fail("read %d of %d" % (len(out), n))
            for recs in (await c.getmany(timeout_ms=500)).values():
                out.extend(recs)
        return out
    finally:
        await c.stop()


async def metadata(a):
    p = await producer(a.bootstrap)
    await send_all(p, [{"topic": a.topic, "value": b"v"}])
    await p.stop()
    adm = await admin(a.bootstrap)
    try:
        cluster = await adm.describe_cluster()
    finally:
        await adm.close()
    brokers = [(b["node_id"], "%s:%d" % (b["host"], b["port"])) for b in cluster["brokers"]]
    if brokers != [(1, a.bootstrap)]:
        raise Fail("brokers %s, want node 1 at %s" % (brokers, a.bootstrap))
    parts = await count_partitions(a.bootstrap, a.topic)
    if parts != {0}:
        raise Fail("partitions of %s: %s, want {0}" % (a.topic, parts))


async def count_partitions(addr, topic):
    """The partition ids of topic in a Metadata request for every topic
    (one naming the topic would auto-create it), or None if not listed."""
    adm = await admin(addr)
    try:
        for t in await adm.describe_topics():
            if t["topic"] == topic:
                return {p["partition"] for p in t["partitions"]}
        return None
    finally:
        await adm.close()


async def topics_admin(a):
    # Polled: Kafka's brokers learn of a committed admin change a moment
    # after the request returns.
    async def has(n):
        got = await count_partitions(a.bootstrap, a.topic)
        return None if got is not None and len(got) == n else "partitions %s, want %d" % (got, n)
    await create(a.bootstrap, a.topic, 3)
    await wait_for("after create", lambda: has(3))
    adm = await admin(a.bootstrap)
    try:
        r = await adm.create_partitions({a.topic: NewPartitions(5)}, timeout_ms=TIMEOUT * 1000)
        check_codes("CreatePartitions", [(t[0], t[1]) for t in r.topic_errors])
        await wait_for("after CreatePartitions", lambda: has(5))
        r = await adm.delete_topics([a.topic], timeout_ms=TIMEOUT * 1000)
        check_codes("DeleteTopics", r.topic_error_codes)
    finally:
        await adm.close()

    async def gone():
        return None if await count_partitions(a.bootstrap, a.topic) is None else "listed"
    await wait_for("topic gone after delete", gone)


def produce_codec(codec):
    async def run(a):
        await create(a.bootstrap, a.topic, 1)
        p = await producer(a.bootstrap, compression_type=None if codec == "none" else codec, linger_ms=200)
        await send_all(p, [{"topic": a.topic, "partition": 0, "key": common.produce_key(i).encode(),
                            "value": common.produce_value(i).encode(), "headers": [("i", str(i).encode())]}
                           for i in range(common.PRODUCE_COUNT)])
        await p.stop()
        got = await read(a.bootstrap, a.topic, [0], common.PRODUCE_COUNT)
        for i, m in enumerate(got):
            if (m.offset != i or m.key != common.produce_key(i).encode()
                    or m.value != common.produce_value(i).encode() or list(m.headers) != [("i", str(i).encode())]):
                raise Fail("message %d: offset %d key %r value %r headers %r" % (i, m.offset, m.key, m.value, m.headers))
    return run


async def order_key(a):
    await create(a.bootstrap, a.topic, 4)
    seq, msgs = {}, []
    for i in range(common.ORDER_COUNT):
        k = common.produce_key(i % common.ORDER_KEYS)
        msgs.append({"topic": a.topic, "key": k.encode(), "value": str(seq.get(k, 0)).encode()})
        seq[k] = seq.get(k, 0) + 1
    p = await producer(a.bootstrap)
    await send_all(p, msgs)
    await p.stop()
    got = await read(a.bootstrap, a.topic, range(4), common.ORDER_COUNT)
    got.sort(key=lambda m: (m.partition, m.offset))
    common.check_order([(m.key.decode(), m.value.decode(), m.partition) for m in got])


async def group_resume(a):
    await create(a.bootstrap, a.topic, 2)
    n = 100
    p = await producer(a.bootstrap)
    await send_all(p, [{"topic": a.topic, "partition": i % 2, "value": str(i).encode()} for i in range(n)])
    await p.stop()
    seen = {}

    async def member(limit):
        c = await consumer(a.bootstrap, group_id=a.topic + "-group", session_timeout_ms=10000,
                           heartbeat_interval_ms=1000)
        try:
            c.subscribe([a.topic])
            got = 0
            deadline = time.time() + 40
            while got < limit:
                if time.time() > deadline:
                    raise Fail("group member read %d of %d" % (got, limit))
                for recs in (await c.getmany(timeout_ms=500, max_records=limit - got)).values():
                    for m in recs:
                        seen[m.value] = seen.get(m.value, 0) + 1
                        got += 1
                await c.commit()
        finally:
            await c.stop()  # leaves the group
    await member(n // 2)
    await member(n - n // 2)
    for i in range(n):
        if seen.get(str(i).encode()) != 1:
            raise Fail("record %d read %s times across the two members" % (i, seen.get(str(i).encode())))


class SplitListener(ConsumerRebalanceListener):
    """Tracks one group.split member's assignment through aiokafka's
    rebalance callbacks (eager: revoke all, then assign anew)."""

    def __init__(self, topic, m, asg):
        self.topic, self.m, self.asg = topic, m, asg

    def on_partitions_revoked(self, revoked):
        self.asg.remove(self.m, [tp.partition for tp in revoked if tp.topic == self.topic])

    def on_partitions_assigned(self, assigned):
        self.asg.add(self.m, [tp.partition for tp in assigned if tp.topic == self.topic])


async def group_split(a):
    """Two AIOKafkaConsumers of one group as two tasks of one event loop,
    with aiokafka's default assignor (range)."""
    await create(a.bootstrap, a.topic, common.SPLIT_PARTITIONS)
    group = common.split_group(a.topic)
    asg, tally = common.SplitAssign(), common.SplitTally()
    stop = asyncio.Event()
    errors = []

    async def member(m):
        c = None
        try:
            c = await consumer(a.bootstrap, group_id=group, client_id="%s-%d" % (group, m),
                               session_timeout_ms=common.SPLIT_SESSION_MS, heartbeat_interval_ms=1000,
                               request_timeout_ms=common.SPLIT_SESSION_MS + 10000)
            c.subscribe([a.topic], listener=SplitListener(a.topic, m, asg))
            while not stop.is_set():
                n = 0
                for recs in (await c.getmany(timeout_ms=200)).values():
                    for r in recs:
                        tally.record(m, r.partition, r.value.decode())
                        n += 1
                if n:
                    await c.commit()  # the positions after what was just processed
                    tally.commit(n)
        except Exception as e:  # the member's failure is the scenario's
            errors.append("member %d: %s: %s" % (m, type(e).__name__, e))
        finally:
            if c is not None:
                await c.stop()  # leaves the group

    async def until(what, cond, timeout):
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            if errors:
                raise Fail(errors[0])
            last = cond()
            if last is None:
                return
            await asyncio.sleep(0.1)
        raise Fail("%s: still %s after %.0fs" % (what, last, timeout))

    tasks = [asyncio.create_task(member(m)) for m in range(2)]
    try:
        await until("wait for both members to hold a part of the topic",
                    lambda: common.valid_split(asg.snapshot()[0]), 45)
        sets, changes = asg.snapshot()
        p = await producer(a.bootstrap)
        await send_all(p, [{"topic": a.topic, "partition": i % common.SPLIT_PARTITIONS, "value": str(i).encode()}
                           for i in range(common.SPLIT_COUNT)])
        await p.stop()

        def uncommitted():
            with tally.lock:
                c = tally.committed
            return None if c >= common.SPLIT_COUNT else "%d of %d processed and committed" % (c, common.SPLIT_COUNT)
        await until("wait for every record to be processed and committed", uncommitted, 45)
        asg.still_split(sets, changes)
    finally:
        stop.set()
        done, pending = await asyncio.wait(tasks, timeout=30)
    if pending:
        raise Fail("a member did not stop within 30s")
    if errors:
        raise Fail(errors[0])
    return tally.check(sets)


async def idempotent(a):
    await create(a.bootstrap, a.topic, 1)
    p = await producer(a.bootstrap, enable_idempotence=True)
    await send_all(p, [{"topic": a.topic, "value": str(i).encode()} for i in range(common.PRODUCE_COUNT)])
    await p.stop()
    got = await read(a.bootstrap, a.topic, [0], common.PRODUCE_COUNT)
    for i, m in enumerate(got):
        if m.value != str(i).encode():
            raise Fail("offset %d holds %r" % (i, m.value))


async def txn(a):
    await create(a.bootstrap, a.topic, 1)
    p = await producer(a.bootstrap, transactional_id=a.topic + "-txn")
    try:
        for t, commit in enumerate((True, False, True)):
            await p.begin_transaction()
            futures = [await p.send(a.topic, value=("t%d-%d" % (t, i)).encode(), partition=0) for i in range(10)]
            for f in futures:
                await asyncio.wait_for(f, TIMEOUT)
            if commit:
                await p.commit_transaction()
            else:
                await p.abort_transaction()
    finally:
        await p.stop()
    c = await consumer(a.bootstrap, isolation_level="read_committed")
    got = []
    try:
        tp = TopicPartition(a.topic, 0)
        c.assign([tp])
        await c.seek_to_beginning(tp)
        deadline = time.time() + 5
        while time.time() < deadline:
            for recs in (await c.getmany(timeout_ms=500)).values():
                got.extend(m.value.decode() for m in recs)
    finally:
        await c.stop()
    if got != common.committed_values():
        raise Fail("read_committed read %s, want %s" % (got, common.committed_values()))


async def listoffsets_time(a):
    await create(a.bootstrap, a.topic, 1)
    p = await producer(a.bootstrap)
    await send_all(p, [{"topic": a.topic, "partition": 0, "value": str(i).encode(),
                        "timestamp_ms": common.TIME_BASE + i * 1000} for i in range(10)])
    await p.stop()
    c = await consumer(a.bootstrap)
    tp = TopicPartition(a.topic, 0)
    try:
        for at, want in ((common.TIME_BASE + 3500, 4), (common.TIME_BASE + 3000, 3)):
            got = (await c.offsets_for_times({tp: at}))[tp]
            if got is None or got.offset != want or got.timestamp != common.TIME_BASE + want * 1000:
                raise Fail("offsets_for_times(%d): %s, want offset %d stamped %d"
                           % (at, got, want, common.TIME_BASE + want * 1000))
        lo, hi = (await c.beginning_offsets([tp]))[tp], (await c.end_offsets([tp]))[tp]
        if (lo, hi) != (0, 10):
            raise Fail("beginning/end offsets (%d, %d), want (0, 10)" % (lo, hi))
    finally:
        await c.stop()


async def describe(addr, topic):
    adm = await admin(addr)
    try:
        rs = await adm.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    finally:
        await adm.close()
    res = rs[0].resources[0]
    if res[0] != 0:
        raise Fail("DescribeConfigs %s: error code %d %s" % (topic, res[0], res[1]))
    return {e[0]: e[1] for e in res[4]}


async def want_configs(addr, topic, want):
    # Polled: Kafka's brokers learn of a committed config change a moment
    # after the request returns.
    async def differs():
        got = await describe(addr, topic)
        for k, v in want.items():
            if got.get(k) != v:
                return "%s=%r, want %r" % (k, got.get(k), v)
        return None
    await wait_for("DescribeConfigs %s" % topic, differs)


async def configs_describe(a):
    await create(a.bootstrap, a.topic, 1, {"retention.ms": "123456789"})
    await want_configs(a.bootstrap, a.topic, {"retention.ms": "123456789", "cleanup.policy": "delete"})


async def configs_alter(a):
    await create(a.bootstrap, a.topic, 1)
    adm = await admin(a.bootstrap)
    try:
        rs = await adm.alter_configs([ConfigResource(ConfigResourceType.TOPIC, a.topic,
                                                     configs={"retention.ms": "987654321"})])
    finally:
        await adm.close()
    for r in rs:
        for res in r.resources:
            if res[0] != 0:
                raise Fail("AlterConfigs: error code %d %s" % (res[0], res[1]))
    await want_configs(a.bootstrap, a.topic, {"retention.ms": "987654321"})
    return "AlterConfigs (key 33): aiokafka %s has no IncrementalAlterConfigs" % aiokafka.__version__


async def deleterecords(a):
    await create(a.bootstrap, a.topic, 1)
    p = await producer(a.bootstrap)
    await send_all(p, [{"topic": a.topic, "partition": 0, "value": str(i).encode()} for i in range(10)])
    await p.stop()
    tp = TopicPartition(a.topic, 0)
    adm = await admin(a.bootstrap)
    try:
        low = (await adm.delete_records({tp: RecordsToDelete(4)}, timeout_ms=TIMEOUT * 1000)).get(tp)
    finally:
        await adm.close()
    if low != 4:
        raise Fail("DeleteRecords to 4 answered low watermark %s" % low)
    got = await read(a.bootstrap, a.topic, [0], 6)
    if got[0].offset != 4:
        raise Fail("first record from the beginning at %d, want 4" % got[0].offset)
    c = await consumer(a.bootstrap)
    try:
        lo, hi = (await c.beginning_offsets([tp]))[tp], (await c.end_offsets([tp]))[tp]
    finally:
        await c.stop()
    if (lo, hi) != (4, 10):
        raise Fail("beginning/end offsets (%d, %d) after DeleteRecords to 4, want (4, 10)" % (lo, hi))


async def big_record(a):
    await create(a.bootstrap, a.topic, 1, {"max.message.bytes": str(common.BIG_TOPIC_MAX)})
    big, want = common.big_value()
    p = await producer(a.bootstrap, max_request_size=common.BIG_TOPIC_MAX + 1000)
    await send_all(p, [{"topic": a.topic, "partition": 0, "key": b"big", "value": big}])
    await p.stop()
    got = (await read(a.bootstrap, a.topic, [0], 1, max_partition_fetch_bytes=common.BIG_TOPIC_MAX + 1000))[0].value
    if hashlib.sha256(got).hexdigest() != want:
        raise Fail("read back %d bytes with another hash" % len(got))


async def bulk(a):
    await create(a.bootstrap, a.topic, 3)
    p = await producer(a.bootstrap, max_batch_size=64 * 1024)
    futures = [await p.send(a.topic, value=common.bulk_value(i).encode()) for i in range(common.BULK_COUNT)]
    await p.flush()
    for f in futures:
        await asyncio.wait_for(f, TIMEOUT)
    await p.stop()
    got = await read(a.bootstrap, a.topic, range(3), common.BULK_COUNT)
    values = [m.value for m in got]
    if len(values) != common.BULK_COUNT or common.bulk_sum(values) != common.want_bulk_sum():
        raise Fail("read %d records with checksum %d, want %d with %d"
                   % (len(values), common.bulk_sum(values), common.BULK_COUNT, common.want_bulk_sum()))
    return "checksum %d" % common.want_bulk_sum()


async def unknown_topic(a):
    # aiokafka raises the Metadata answer's UNKNOWN_TOPIC_OR_PARTITION
    # (or times out waiting for the topic within request_timeout_ms).
    p = await producer(a.strict, request_timeout_ms=5000)
    try:
        await p.send_and_wait(a.topic, value=b"v")
    except (UnknownTopicOrPartitionError, KafkaTimeoutError) as e:
        return "%s: %s" % (type(e).__name__, e)
    finally:
        await p.stop()
    raise Fail("produced to an unknown topic with auto-create off")


async def too_large(a):
    await create(a.bootstrap, a.topic, 1, {"max.message.bytes": str(common.SMALL_TOPIC_MAX)})
    big, _ = common.big_value()
    p = await producer(a.bootstrap)
    try:
        await p.send_and_wait(a.topic, value=big[:common.TOO_LARGE_VALUE], partition=0)
    except MessageSizeTooLargeError:
        return ""
    finally:
        await p.stop()
    raise Fail("produced %d bytes to max.message.bytes=%d" % (common.TOO_LARGE_VALUE, common.SMALL_TOPIC_MAX))


async def offset_past_end(a):
    await create(a.bootstrap, a.topic, 1)
    p = await producer(a.bootstrap)
    await send_all(p, [{"topic": a.topic, "partition": 0, "value": str(i).encode()} for i in range(10)])
    await p.stop()
    got = await read(a.bootstrap, a.topic, [0], 10, seek=100)
    if got[0].offset != 0:
        raise Fail("after reset to earliest the first record is at %d" % got[0].offset)
    return "OFFSET_OUT_OF_RANGE at 100, reset to earliest (0)"


async def topic_deleted(a):
    await create(a.bootstrap, a.topic, 1)
    p = await producer(a.bootstrap)
    await send_all(p, [{"topic": a.topic, "partition": 0, "value": str(i).encode()} for i in range(10)])
    await p.stop()
    c = await consumer(a.bootstrap)
    tp = TopicPartition(a.topic, 0)
    c.assign([tp])
    await c.seek_to_beginning(tp)
    n = 0
    deadline = time.time() + 30
    while n < 10:
        if time.time() > deadline:
            raise Fail("read %d of 10 before the delete" % n)
        n += sum(len(r) for r in (await c.getmany(timeout_ms=500)).values())
    adm = await admin(a.bootstrap)
    try:
        check_codes("DeleteTopics", (await adm.delete_topics([a.topic], timeout_ms=TIMEOUT * 1000)).topic_error_codes)
    finally:
        await adm.close()
    seen = None
    deadline = time.time() + 10
    while time.time() < deadline and seen is None:
        try:
            got = sum(len(r) for r in (await c.getmany(timeout_ms=500)).values())
        except Exception as e:  # the client's report of the deletion
            seen = e
            break
        if got:
            raise Fail("read %d records after the topic was deleted" % got)
    try:
        await asyncio.wait_for(c.stop(), 10)
    except asyncio.TimeoutError:
        raise Fail("AIOKafkaConsumer.stop() did not return within 10s after the topic was deleted")
    if seen is not None:
        return "consumer reported: %s: %s" % (type(seen).__name__, seen)
    return "consumer stayed silent (no records, no error) and stopped"


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


def sync(coro_fn):
    """common.main calls scenarios synchronously: one event loop each."""
    return lambda a: asyncio.run(coro_fn(a))


if __name__ == "__main__":
    common.main({k: sync(v) for k, v in SCENARIOS.items()})
