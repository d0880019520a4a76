"""One cell of TestSecuredClients (secured_clients_test.go) for a Python
client: over a SASL_SSL (SCRAM-SHA-512) or SSL (mTLS) listener, either
produce 10 keyed records and read them back ("roundtrip"), or try to
reach the broker with credentials it must refuse ("refused"). Prints one
JSON line: {"read": ["key=value", ...]} or {"error": "..."}."""

import argparse
import io
import json
import logging
import sys
import time


def confluent(a):
    import confluent_kafka
    import confluent_kafka.admin

    conf = {"bootstrap.servers": a.bootstrap, "security.protocol": a.protocol,
            "ssl.ca.location": a.ca}
    if a.protocol == "SASL_SSL":
        conf.update({"sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": a.user,
                     "sasl.password": a.password})
    elif a.cert:
        conf.update({"ssl.certificate.location": a.cert, "ssl.key.location": a.key})
    if a.mode == "refused":
        # An authentication failure surfaces as an error in the error
        # callback; a metadata request that cannot succeed then times out.
        errs = []
        conf["error_cb"] = lambda e: errs.append(str(e))
        adm = confluent_kafka.admin.AdminClient(conf)
        try:
            adm.list_topics(timeout=8)
        except confluent_kafka.KafkaException as e:
            adm.poll(1)  # serves the error callback
            return {"error": "; ".join(errs + [str(e)])}
        return {"read": []}
    p = confluent_kafka.Producer(dict(conf, acks="all"))
    for i in range(10):
        p.produce(a.topic, key=b"k%d" % i, value=b"v%d" % i)
    if p.flush(20) != 0:
        return {"error": "flush left records unsent"}
    c = confluent_kafka.Consumer(dict(conf, **{"group.id": "secured-" + a.topic, "auto.offset.reset": "earliest",
                                                "enable.auto.commit": False}))
    c.assign([confluent_kafka.TopicPartition(a.topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    read, deadline = [], time.time() + 20
    while len(read) < 10 and time.time() < deadline:
        m = c.poll(1)
        if m is None:
            continue
        if m.error():
            return {"error": str(m.error())}
        read.append("%s=%s" % (m.key().decode(), m.value().decode()))
    c.close()
    return {"read": read}


def kafka_python(a):
    import kafka
    from kafka.structs import TopicPartition

    conf = {"bootstrap_servers": a.bootstrap, "security_protocol": a.protocol, "ssl_cafile": a.ca,
            "ssl_check_hostname": True, "api_version_auto_timeout_ms": 8000}
    if a.protocol == "SASL_SSL":
        conf.update({"sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": a.user,
                     "sasl_plain_password": a.password})
    elif a.cert:
        conf.update({"ssl_certfile": a.cert, "ssl_keyfile": a.key})
    if a.mode == "refused":
        # kafka-python logs why a bootstrap connection failed and raises
        # NoBrokersAvailable; the log lines say which refusal it was. Its
        # SCRAM sends raw SASL tokens (no SaslAuthenticate), so a wrong
        # password shows as the broker closing the connection while it is
        # <authenticating>, as a Kafka broker does for such clients.
        log = io.StringIO()
        handler = logging.StreamHandler(log)
        logging.getLogger("kafka").addHandler(handler)
        logging.getLogger("kafka").setLevel(logging.ERROR)
        try:
            p = kafka.KafkaProducer(max_block_ms=8000, **conf)
            p.partitions_for(a.topic)
        except Exception as e:  # the client raises its own error types
            why = [ln for ln in log.getvalue().splitlines() if "uth" in ln or "SSL" in ln]
            return {"error": "%s: %s; %s" % (type(e).__name__, e, " | ".join(why[:1]))}
        return {"read": []}
    p = kafka.KafkaProducer(acks="all", **conf)
    for i in range(10):
        p.send(a.topic, key=b"k%d" % i, value=b"v%d" % i)
    p.flush(20)
    p.close()
    c = kafka.KafkaConsumer(consumer_timeout_ms=20000, **conf)
    tp = TopicPartition(a.topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    read = []
    for m in c:
        read.append("%s=%s" % (m.key.decode(), m.value.decode()))
        if len(read) == 10:
            break
    c.close()
    return {"read": read}


def main():
    ap = argparse.ArgumentParser()
    for f in ("client", "bootstrap", "protocol", "ca", "topic", "mode"):
        ap.add_argument("--" + f, required=True)
    for f in ("cert", "key", "keystore", "user", "password"):
        ap.add_argument("--" + f, default="")
    a = ap.parse_args()
    try:
        res = {"confluent-kafka": confluent, "kafka-python": kafka_python}[a.client](a)
    except Exception as e:
        res = {"error": "%s: %s" % (type(e).__name__, e)}
    print(json.dumps(res))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
