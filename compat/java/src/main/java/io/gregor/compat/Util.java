package io.gregor.compat;

import io.gregor.compat.Runner.Fail;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.function.Supplier;
import java.util.zip.CRC32;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The data every client writes (compat/checks_test.go and
 * python/common.py define the same) and the helpers the scenarios share.
 */
final class Util {
    private Util() {}

    static final int PRODUCE_COUNT = 1000;
    static final int ORDER_KEYS = 20;
    static final int ORDER_COUNT = 2000;
    static final int BULK_COUNT = 100000;
    static final int ONE_MIB = 1 << 20;
    static final int BIG_TOPIC_MAX = 2 << 20;
    static final int SMALL_TOPIC_MAX = 10000;
    static final int TOO_LARGE_VALUE = 20000;
    /** Record i of listoffsets.time is stamped TIME_BASE + i seconds (2024-01-01T00:00:00Z). */
    static final long TIME_BASE = 1704067200000L;
    static final int SPLIT_PARTITIONS = 4;
    static final int SPLIT_COUNT = 200;
    static final int SPLIT_SESSION_MS = 30000;

    static String produceKey(int i) {
        return "key-" + i;
    }

    static String produceValue(int i) {
        return "value-" + i + "-" + "x".repeat(i % 37);
    }

    static String bulkValue(int i) {
        return String.format("bulk-%06d", i);
    }

    /** The sum of the CRC-32 of every value: independent of the order read. */
    static long bulkSum(Collection<byte[]> values) {
        long s = 0;
        for (byte[] v : values) {
            CRC32 c = new CRC32();
            c.update(v);
            s += c.getValue();
        }
        return s;
    }

    /** 1 MiB of deterministic, incompressible bytes: SHA-256 of a counter, chained (as python/common.py). */
    static byte[] bigValue() throws Exception {
        byte[] out = new byte[ONE_MIB];
        MessageDigest md = MessageDigest.getInstance("SHA-256");
        for (int off = 0, counter = 0; off < out.length; counter++) {
            byte[] d = md.digest(ByteBuffer.allocate(8).putLong(counter).array());
            int n = Math.min(d.length, out.length - off);
            System.arraycopy(d, 0, out, off, n);
            off += n;
        }
        return out;
    }

    static String sha256(byte[] b) throws Exception {
        return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(b));
    }

    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String str(byte[] b) {
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }

    static Properties common(String bootstrap) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", "gregor-compat-java");
        return p;
    }

    static Admin admin(String bootstrap) {
        Properties p = common(bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        return Admin.create(p);
    }

    static KafkaProducer<byte[], byte[]> producer(String bootstrap, Map<String, Object> extra) {
        Properties p = common(bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "30000");
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
        p.putAll(extra);
        return new KafkaProducer<>(p);
    }

    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, Map<String, Object> extra) {
        Properties p = common(bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "200");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(ConsumerConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        p.putAll(extra);
        return new KafkaConsumer<>(p);
    }

    static void createTopic(String bootstrap, String topic, int partitions, Map<String, String> configs) throws Exception {
        try (Admin a = admin(bootstrap)) {
            a.createTopics(List.of(new NewTopic(topic, partitions, (short) 1).configs(configs))).all().get();
        }
    }

    /** Sends every record, waits for each acknowledgement and returns their metadata in order. */
    static List<RecordMetadata> produce(String bootstrap, List<ProducerRecord<byte[], byte[]>> records,
            Map<String, Object> extra) throws Exception {
        try (KafkaProducer<byte[], byte[]> p = producer(bootstrap, extra)) {
            return sendAll(p, records);
        }
    }

    static List<RecordMetadata> sendAll(KafkaProducer<byte[], byte[]> p, List<ProducerRecord<byte[], byte[]>> records)
            throws Exception {
        List<Future<RecordMetadata>> fs = new ArrayList<>(records.size());
        for (ProducerRecord<byte[], byte[]> r : records) {
            fs.add(p.send(r));
        }
        p.flush();
        List<RecordMetadata> out = new ArrayList<>(fs.size());
        for (Future<RecordMetadata> f : fs) {
            out.add(f.get());
        }
        return out;
    }

    /**
     * Reads partitions 0..partitions-1 of topic from the beginning, outside
     * any group, until want records are read or timeoutMs passes.
     */
    static List<ConsumerRecord<byte[], byte[]>> readAll(String bootstrap, String topic, int partitions, int want,
            Map<String, Object> extra, long timeoutMs) throws Exception {
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, extra)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int p = 0; p < partitions; p++) {
                tps.add(new TopicPartition(topic, p));
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (out.size() < want) {
                if (System.currentTimeMillis() > deadline) {
                    throw new Fail("read " + out.size() + " of " + want + " records of " + topic + " in " + timeoutMs + " ms");
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    out.add(r);
                }
            }
        }
        return out;
    }

    /** Polls cond every 100 ms until it returns null; throws Fail with its last answer after timeoutMs. */
    static void waitFor(String what, long timeoutMs, Supplier<String> cond) throws Fail, InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        String last;
        while ((last = cond.get()) != null) {
            if (System.currentTimeMillis() > deadline) {
                throw new Fail(what + ": still " + last + " after " + timeoutMs / 1000 + "s");
            }
            Thread.sleep(100);
        }
    }

    /** Like waitFor, for a condition that may throw: its exception is kept as the last answer. */
    static void waitForChecked(String what, long timeoutMs, CheckedSupplier cond) throws Fail, InterruptedException {
        waitFor(what, timeoutMs, () -> {
            try {
                return cond.get();
            } catch (Exception e) {
                return describe(e);
            }
        });
    }

    @FunctionalInterface
    interface CheckedSupplier {
        String get() throws Exception;
    }

    /** The cause of a wrapped client exception: Class: message. */
    static Throwable root(Throwable e) {
        while ((e instanceof ExecutionException || e.getClass() == RuntimeException.class) && e.getCause() != null) {
            e = e.getCause();
        }
        return e;
    }

    static String describe(Throwable e) {
        Throwable r = root(e);
        String s = r.getClass().getSimpleName() + ": " + r.getMessage();
        if (r.getCause() != null && r.getCause() != r) {
            s += " (cause " + r.getCause().getClass().getSimpleName() + ": " + r.getCause().getMessage() + ")";
        }
        return s;
    }

    /** Expects call to throw an exception (or one whose cause is) of want; returns it. */
    static <T extends Throwable> T expectThrows(String what, Class<T> want, CheckedRunnable call) throws Fail {
        try {
            call.run();
        } catch (Throwable e) {
            for (Throwable c = e; c != null; c = c.getCause()) {
                if (want.isInstance(c)) {
                    return want.cast(c);
                }
                if (c.getCause() == c) {
                    break;
                }
            }
            throw new Fail(what + ": " + describe(e) + ", want " + want.getSimpleName());
        }
        throw new Fail(what + ": succeeded, want " + want.getSimpleName());
    }

    @FunctionalInterface
    interface CheckedRunnable {
        void run() throws Exception;
    }

    static void check(boolean ok, String why) throws Fail {
        if (!ok) {
            throw new Fail(why);
        }
    }

    static Map<String, String> map(String... kv) {
        Map<String, String> m = new HashMap<>();
        for (int i = 0; i + 1 < kv.length; i += 2) {
            m.put(kv[i], kv[i + 1]);
        }
        return m;
    }

    static String json(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }
}
