package io.gregor.compat;

import static io.gregor.compat.Scenarios.groupProps;
import static io.gregor.compat.Scenarios.rec;
import static io.gregor.compat.Scenarios.validSplit;
import static io.gregor.compat.Util.*;

import io.gregor.compat.Runner.Env;
import io.gregor.compat.Runner.Scenario;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BiConsumer;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.TopicPartition;

/**
 * Group behaviours beyond the shared scenarios: static membership,
 * cooperative rebalancing, KIP-848's incremental reassignment and regex
 * subscription, and exactly-once consume-transform-produce.
 */
final class Groups {
    private Groups() {}

    static void register(Map<String, Scenario> m) {
        m.put("group.static", Groups::staticMembership);
        m.put("group.cooperative", env -> incremental(env, "classic"));
        m.put("group.session_expiry", Groups::sessionExpiry);
        m.put("group.rebalance.consumer", env -> incremental(env, "consumer"));
        m.put("group.regex.consumer", Groups::regex);
        m.put("txn.eos", env -> eos(env, "classic"));
        m.put("txn.eos.consumer", env -> eos(env, "consumer"));
    }

    /**
     * One group member on its own thread (a consumer is not thread-safe):
     * it polls, records what it reads, commits after each poll and tracks
     * its assignment through its rebalance listener.
     */
    static final class Member {
        final String name;
        final Set<Integer> parts = new TreeSet<>();
        final List<Set<Integer>> revocations = new ArrayList<>();
        final Map<String, Integer> seen = new HashMap<>();
        final List<String> errors = new CopyOnWriteArrayList<>();
        int changes;
        private volatile CloseOptions closeWith;
        private final Thread thread;

        Member(String bootstrap, String name, Map<String, Object> props,
                BiConsumer<KafkaConsumer<byte[], byte[]>, ConsumerRebalanceListener> subscribe) {
            this.name = name;
            thread = new Thread(() -> {
                try {
                    KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, props);
                    try {
                        subscribe.accept(c, listener());
                        while (closeWith == null) {
                            ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(100));
                            synchronized (this) {
                                for (ConsumerRecord<byte[], byte[]> r : rs) {
                                    seen.merge(r.topic() + "/" + str(r.value()), 1, Integer::sum);
                                }
                            }
                            if (!rs.isEmpty()) {
                                c.commitSync();
                            }
                        }
                    } finally {
                        c.close(closeWith == null ? CloseOptions.timeout(Duration.ofSeconds(10)) : closeWith);
                    }
                } catch (Exception e) {
                    e.printStackTrace(System.err);
                    errors.add(name + ": " + describe(e));
                }
            }, name);
            thread.start();
        }

        ConsumerRebalanceListener listener() {
            return new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> ps) {
                    remove(ps, true);
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> ps) {
                    synchronized (Member.this) {
                        for (TopicPartition tp : ps) {
                            if (parts.add(tp.partition())) {
                                changes++;
                            }
                        }
                    }
                }

                @Override
                public void onPartitionsLost(Collection<TopicPartition> ps) {
                    remove(ps, false);
                }
            };
        }

        private synchronized void remove(Collection<TopicPartition> ps, boolean revoked) {
            Set<Integer> gone = new TreeSet<>();
            for (TopicPartition tp : ps) {
                if (parts.remove(tp.partition())) {
                    gone.add(tp.partition());
                    changes++;
                }
            }
            if (revoked && !gone.isEmpty()) {
                revocations.add(gone);
            }
        }

        synchronized List<Integer> parts() {
            return new ArrayList<>(parts);
        }

        synchronized int changes() {
            return changes;
        }

        synchronized int read() {
            return seen.values().stream().mapToInt(Integer::intValue).sum();
        }

        synchronized Map<String, Integer> seen() {
            return new HashMap<>(seen);
        }

        synchronized List<Set<Integer>> revocations() {
            return new ArrayList<>(revocations);
        }

        /** Stops polling and closes the consumer with how, waiting for it. */
        void close(CloseOptions how) throws Exception {
            closeWith = how;
            thread.join(20000);
            check(!thread.isAlive(), name + " did not close within 20s");
        }
    }

    static Member member(Env env, String name, Map<String, Object> props, String topic) {
        return new Member(env.bootstrap(), name, props, (c, l) -> c.subscribe(List.of(topic), l));
    }

    static void produceSpread(Env env, String topic, int partitions, int n) throws Exception {
        List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            recs.add(rec(topic, i % partitions, null, String.valueOf(i)));
        }
        produce(env.bootstrap(), recs, Map.of());
    }

    /** Waits until the members together read every one of n values of topic once, and checks none twice. */
    static void readOnce(String topic, int n, Member... ms) throws Exception {
        waitFor("wait for the members to read the " + n + " records", 30000, () -> {
            int total = 0;
            for (Member m : ms) {
                if (!m.errors.isEmpty()) {
                    return m.errors.get(0);
                }
                total += m.read();
            }
            return total >= n ? null : total + " of " + n + " read";
        });
        Map<String, Integer> all = new HashMap<>();
        for (Member m : ms) {
            m.seen().forEach((k, v) -> all.merge(k, v, Integer::sum));
        }
        for (int i = 0; i < n; i++) {
            int c = all.getOrDefault(topic + "/" + i, 0);
            check(c == 1, "record " + i + " read " + c + " times");
        }
    }

    static List<List<Integer>> sets(Member a, Member b) {
        return List.of(a.parts(), b.parts());
    }

    /**
     * Static membership (KIP-345): a member that closes without leaving
     * and comes back with its group.instance.id within the session timeout
     * gets its partitions back, and the other member sees no rebalance;
     * both then leave by instance id and the group is empty.
     */
    static String staticMembership(Env env) throws Exception {
        String t = env.topic(), group = t + "-group";
        createTopic(env.bootstrap(), t, 4, Map.of());
        Map<String, Object> pa = groupProps(group, "classic", 30000), pb = groupProps(group, "classic", 30000);
        pa.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "a");
        pb.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "b");
        Member a = member(env, "static-a", pa, t), b = member(env, "static-b", pb, t);
        Member a2 = null;
        try (Admin adm = admin(env.bootstrap())) {
            waitFor("wait for both static members to hold a part of the topic", 45000,
                    () -> !a.errors.isEmpty() ? a.errors.get(0) : !b.errors.isEmpty() ? b.errors.get(0) : validSplit(sets(a, b)));
            List<Integer> aParts = a.parts();
            int bChanges = b.changes();
            a.close(CloseOptions.groupMembershipOperation(CloseOptions.GroupMembershipOperation.REMAIN_IN_GROUP));
            ConsumerGroupDescription d = adm.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
            check(d.members().size() == 2, "after static member a closed without leaving the group has " + d.members().size()
                    + " members (" + d.groupState() + "), want 2 until its session times out");
            a2 = member(env, "static-a-again", pa, t);
            Member again = a2;
            waitFor("wait for static member a to come back", 20000, () -> !again.errors.isEmpty() ? again.errors.get(0)
                    : again.parts().isEmpty() ? "no partitions yet" : null);
            Thread.sleep(2000); // a rebalance, if the rejoin caused one, shows by now
            check(a2.parts().equals(aParts), "static member a came back with " + a2.parts() + ", had " + aParts);
            check(b.changes() == bChanges, "member b's assignment changed while static member a came back: " + b.parts());
            produceSpread(env, t, 4, 40);
            readOnce(t, 40, a2, b);
            a2.close(CloseOptions.groupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP));
            // b stays in the group when it closes; Admin removes it by its
            // instance id (LeaveGroup v3+ sent by the admin client).
            b.close(CloseOptions.groupMembershipOperation(CloseOptions.GroupMembershipOperation.REMAIN_IN_GROUP));
            adm.removeMembersFromConsumerGroup(group, new org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions(
                    List.of(new org.apache.kafka.clients.admin.MemberToRemove("b")))).all().get();
            waitForChecked("the group empty after a left and Admin removed b", 10000, () -> {
                ConsumerGroupDescription e = adm.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
                return e.groupState() == GroupState.EMPTY && e.members().isEmpty() ? null : e.groupState() + " with " + e.members().size() + " members";
            });
            return "a kept " + aParts;
        } finally {
            for (Member m : new Member[] {a, b, a2}) {
                if (m != null) {
                    m.close(CloseOptions.timeout(Duration.ofSeconds(5)));
                }
            }
        }
    }

    /**
     * Incremental rebalancing, classic with the cooperative-sticky assignor
     * or the KIP-848 protocol: a lone member holds all four partitions;
     * when a second joins only the partitions that move are revoked (the
     * first keeps the rest throughout); when it leaves they come back.
     */
    static String incremental(Env env, String protocol) throws Exception {
        String t = env.topic(), group = t + "-group";
        createTopic(env.bootstrap(), t, 4, Map.of());
        Map<String, Object> props = groupProps(group, protocol, 30000);
        if (protocol.equals("classic")) {
            props.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, CooperativeStickyAssignor.class.getName());
        }
        Member a = member(env, "incr-a", props, t);
        Member b = null;
        try {
            waitFor("wait for the lone member to hold every partition", 30000,
                    () -> !a.errors.isEmpty() ? a.errors.get(0) : a.parts().size() == 4 ? null : "holds " + a.parts());
            b = member(env, "incr-b", props, t);
            Member bb = b;
            waitFor("wait for the second member to get a part", 45000,
                    () -> !a.errors.isEmpty() ? a.errors.get(0) : !bb.errors.isEmpty() ? bb.errors.get(0) : validSplit(sets(a, bb)));
            List<Integer> aKept = a.parts(), bGot = b.parts();
            List<Set<Integer>> revs = a.revocations();
            Set<Integer> revoked = new TreeSet<>();
            revs.forEach(revoked::addAll);
            check(revoked.equals(new TreeSet<>(bGot)), "the first member revoked " + revs + " to hand over " + bGot
                    + ": want only the partitions that moved (an incremental rebalance)");
            produceSpread(env, t, 4, 40);
            readOnce(t, 40, a, b);
            b.close(CloseOptions.groupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP));
            waitFor("wait for the partitions to come back after the second member left", 30000,
                    () -> !a.errors.isEmpty() ? a.errors.get(0) : a.parts().size() == 4 ? null : "holds " + a.parts());
            check(a.revocations().size() == revs.size(), "the first member revoked again when the second left: " + a.revocations());
            return "kept " + aKept + ", handed over " + bGot;
        } finally {
            a.close(CloseOptions.timeout(Duration.ofSeconds(5)));
            if (b != null) {
                b.close(CloseOptions.timeout(Duration.ofSeconds(5)));
            }
        }
    }

    /**
     * A member that vanishes without leaving (closed without LeaveGroup,
     * as a crashed process) is expired by the broker after its session
     * timeout, and its partitions go to the member that remains.
     */
    static String sessionExpiry(Env env) throws Exception {
        String t = env.topic(), group = t + "-group";
        createTopic(env.bootstrap(), t, 4, Map.of());
        // 6 s: Kafka's group.min.session.timeout.ms.
        Map<String, Object> props = groupProps(group, "classic", 6000);
        Member a = member(env, "expiry-a", props, t), b = member(env, "expiry-b", props, t);
        try {
            waitFor("wait for both members to hold a part of the topic", 45000,
                    () -> !a.errors.isEmpty() ? a.errors.get(0) : !b.errors.isEmpty() ? b.errors.get(0) : validSplit(sets(a, b)));
            b.close(CloseOptions.groupMembershipOperation(CloseOptions.GroupMembershipOperation.REMAIN_IN_GROUP));
            long gone = System.currentTimeMillis();
            waitFor("wait for the vanished member's partitions to come to the other", 30000,
                    () -> !a.errors.isEmpty() ? a.errors.get(0) : a.parts().size() == 4 ? null : "holds " + a.parts());
            long took = System.currentTimeMillis() - gone;
            check(took >= 3000, "the partitions moved " + took + " ms after the member vanished: it left the group instead of expiring");
            produceSpread(env, t, 4, 40);
            readOnce(t, 40, a);
            return "reassigned " + took + " ms after the member vanished";
        } finally {
            a.close(CloseOptions.timeout(Duration.ofSeconds(5)));
            b.close(CloseOptions.timeout(Duration.ofSeconds(5)));
        }
    }

    /**
     * KIP-848 regex subscription, resolved by the broker: the member reads
     * the matching topics, one created later too, and not the others.
     */
    static String regex(Env env) throws Exception {
        String t = env.topic(), group = t + "-group";
        for (String s : List.of("-a", "-b")) {
            createTopic(env.bootstrap(), t + s, 1, Map.of());
            produceSpread(env, t + s, 1, 5);
        }
        createTopic(env.bootstrap(), t + "x", 1, Map.of());
        produceSpread(env, t + "x", 1, 5);
        Member[] m = new Member[1];
        m[0] = new Member(env.bootstrap(), "regex", groupProps(group, "consumer", 0),
                (c, l) -> c.subscribe(new SubscriptionPattern(t + "-.*"), l));
        try {
            waitFor("wait for the records of the two matching topics", 30000,
                    () -> !m[0].errors.isEmpty() ? m[0].errors.get(0) : m[0].read() >= 10 ? null : m[0].read() + " of 10 read: " + m[0].seen().keySet());
            createTopic(env.bootstrap(), t + "-c", 1, Map.of());
            produceSpread(env, t + "-c", 1, 5);
            waitFor("wait for the records of a matching topic created later", 45000,
                    () -> !m[0].errors.isEmpty() ? m[0].errors.get(0) : m[0].read() >= 15 ? null : m[0].read() + " of 15 read");
            Thread.sleep(500);
            Map<String, Integer> seen = m[0].seen();
            for (String s : List.of("-a", "-b", "-c")) {
                for (int i = 0; i < 5; i++) {
                    check(seen.getOrDefault(t + s + "/" + i, 0) == 1, "record " + i + " of " + t + s + " read " + seen.get(t + s + "/" + i) + " times");
                }
            }
            check(seen.size() == 15, "read " + seen.keySet() + ", want the 15 records of " + t + "-a, -b and -c only");
            return "";
        } finally {
            m[0].close(CloseOptions.timeout(Duration.ofSeconds(5)));
        }
    }

    /**
     * Consume-transform-produce exactly once: a transaction that sends
     * results and the consumer's offsets (sendOffsetsToTransaction with its
     * group metadata) is aborted once, then rewound and redone; the output
     * read_committed holds each result once and the group's offsets are
     * the input's ends.
     */
    static String eos(Env env, String protocol) throws Exception {
        String t = env.topic(), in = t + "-in", out = t + "-out", group = t + "-group";
        createTopic(env.bootstrap(), in, 2, Map.of());
        createTopic(env.bootstrap(), out, 1, Map.of());
        int n = 20;
        produceSpread(env, in, 2, n);
        Map<String, Object> cprops = groupProps(group, protocol, 10000);
        cprops.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        cprops.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "4");
        Set<String> done = new TreeSet<>();
        int aborted = 0, committed = 0;
        try (KafkaConsumer<byte[], byte[]> c = consumer(env.bootstrap(), cprops);
                KafkaProducer<byte[], byte[]> p = producer(env.bootstrap(), Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, t + "-eos"))) {
            p.initTransactions();
            c.subscribe(List.of(in));
            long deadline = System.currentTimeMillis() + 45000;
            while (done.size() < n) {
                check(System.currentTimeMillis() < deadline, "processed " + done.size() + " of " + n + " inputs");
                ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(200));
                if (rs.isEmpty()) {
                    continue;
                }
                p.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : rs) {
                    p.send(rec(out, 0, null, (aborted == 0 ? "aborted-" : "out-") + str(r.value())));
                    next.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                p.sendOffsetsToTransaction(next, c.groupMetadata());
                if (aborted == 0) {
                    p.abortTransaction();
                    aborted++;
                    // Back to what the group committed: the aborted
                    // transaction's offsets must not count.
                    Map<TopicPartition, OffsetAndMetadata> at = c.committed(c.assignment());
                    for (TopicPartition tp : c.assignment()) {
                        OffsetAndMetadata o = at.get(tp);
                        if (o == null) {
                            c.seekToBeginning(List.of(tp));
                        } else {
                            c.seek(tp, o.offset());
                        }
                    }
                    continue;
                }
                p.commitTransaction();
                committed++;
                for (ConsumerRecord<byte[], byte[]> r : rs) {
                    check(done.add(str(r.value())), "input " + str(r.value()) + " processed twice");
                }
            }
        }
        List<String> got = Scenarios.readCommittedFrom(env.bootstrap(), out, n);
        List<String> want = new ArrayList<>();
        for (String v : done) {
            want.add("out-" + v);
        }
        check(new TreeSet<>(got).equals(new TreeSet<>(want)) && got.size() == n, "read_committed output " + got + ", want each of " + want + " once");
        try (Admin a = admin(env.bootstrap())) {
            Map<TopicPartition, OffsetAndMetadata> offs = a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            for (int part = 0; part < 2; part++) {
                OffsetAndMetadata o = offs.get(new TopicPartition(in, part));
                check(o != null && o.offset() == n / 2, "group offset of " + in + "-" + part + ": " + o + ", want " + n / 2);
            }
        }
        return committed + " transactions committed after 1 aborted";
    }
}
