import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * One cell of TestSecuredClients (secured_clients_test.go) for Kafka's Java
 * client, run by java's single-file source launcher: over a SASL_SSL
 * (SCRAM-SHA-512) or SSL (mTLS) listener, either produce 10 keyed records
 * and read them back ("roundtrip"), or ask for a topic's partitions with
 * credentials the broker must refuse ("refused"). Prints one JSON line:
 * {"read": ["key=value", ...]} or {"error": "..."}.
 */
public class SecuredRoundTrip {
    public static void main(String[] argv) {
        Map<String, String> a = new HashMap<>(Map.of("keystore", "", "user", "", "password", ""));
        for (int i = 0; i + 1 < argv.length; i += 2) {
            a.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        String out;
        try {
            out = run(a);
        } catch (Exception e) {
            out = "{\"error\": " + quote(e.getClass().getSimpleName() + ": " + e.getMessage()) + "}";
        }
        System.out.println(out);
        System.exit(0);
    }

    static String run(Map<String, String> a) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", a.get("bootstrap"));
        p.put("security.protocol", a.get("protocol"));
        p.put("ssl.truststore.type", "PEM");
        p.put("ssl.truststore.location", a.get("ca"));
        if (a.get("protocol").equals("SASL_SSL")) {
            p.put("sasl.mechanism", "SCRAM-SHA-512");
            p.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
                    + a.get("user") + "\" password=\"" + a.get("password") + "\";");
        } else if (!a.get("keystore").isEmpty()) {
            // gregor cert's NAME.keystore.pem holds the key and its chain.
            p.put("ssl.keystore.type", "PEM");
            p.put("ssl.keystore.location", a.get("keystore"));
        }
        String topic = a.get("topic");
        if (a.get("mode").equals("refused")) {
            p.put("max.block.ms", "8000");
            try (KafkaProducer<String, String> pr = new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
                pr.partitionsFor(topic);
            } catch (Exception e) {
                return "{\"error\": " + quote(e.getClass().getSimpleName() + ": " + e.getMessage()) + "}";
            }
            return "{\"read\": []}";
        }
        Properties pp = (Properties) p.clone();
        pp.put("acks", "all");
        try (KafkaProducer<String, String> pr = new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < 10; i++) {
                pr.send(new ProducerRecord<>(topic, "k" + i, "v" + i)).get();
            }
        }
        List<String> read = new ArrayList<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
            TopicPartition tp = new TopicPartition(topic, 0);
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            long deadline = System.currentTimeMillis() + 20000;
            while (read.size() < 10 && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    read.add(r.key() + "=" + r.value());
                }
            }
        }
        StringBuilder sb = new StringBuilder("{\"read\": [");
        for (int i = 0; i < read.size(); i++) {
            sb.append(i == 0 ? "" : ", ").append(quote(read.get(i)));
        }
        return sb.append("]}").toString();
    }

    static String quote(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (char ch : String.valueOf(s).toCharArray()) {
            if (ch == '"' || ch == '\\') {
                sb.append('\\').append(ch);
            } else if (ch < 0x20) {
                sb.append(String.format("\\u%04x", (int) ch));
            } else {
                sb.append(ch);
            }
        }
        return sb.append('"').toString();
    }
}
