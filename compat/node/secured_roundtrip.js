// One cell of TestSecuredClients (secured_clients_test.go) for kafkajs:
// over a SASL_SSL (SCRAM-SHA-512) or SSL (mTLS) listener, either produce
// 10 keyed records and read them back ("roundtrip"), or connect with
// credentials the broker must refuse ("refused"). Prints one JSON line:
// {"read": ["key=value", ...]} or {"error": "..."}.
'use strict';
const fs = require('fs');
const { Kafka, logLevel } = require('kafkajs');

function parseArgs(argv) {
  const a = { cert: '', key: '', user: '', password: '' };
  for (let i = 0; i < argv.length; i += 2) a[argv[i].replace(/^--/, '')] = argv[i + 1];
  return a;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const ssl = { ca: [fs.readFileSync(a.ca, 'utf8')] };
  if (a.protocol === 'SSL' && a.cert) {
    ssl.cert = fs.readFileSync(a.cert, 'utf8');
    ssl.key = fs.readFileSync(a.key, 'utf8');
  }
  const conf = {
    clientId: 'secured-' + a.topic, brokers: [a.bootstrap], ssl,
    logLevel: logLevel.NOTHING, connectionTimeout: 8000, retry: { retries: a.mode === 'refused' ? 0 : 5 },
  };
  if (a.protocol === 'SASL_SSL') conf.sasl = { mechanism: 'scram-sha-512', username: a.user, password: a.password };
  const kafka = new Kafka(conf);
  if (a.mode === 'refused') {
    const admin = kafka.admin();
    try {
      await admin.connect();
      await admin.listTopics();
    } catch (e) {
      return { error: `${e.name}: ${e.message}` };
    } finally {
      await admin.disconnect().catch(() => {});
    }
    return { read: [] };
  }
  const producer = kafka.producer();
  await producer.connect();
  const messages = [];
  for (let i = 0; i < 10; i++) messages.push({ key: `k${i}`, value: `v${i}` });
  await producer.send({ topic: a.topic, acks: -1, messages });
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId: 'secured-' + a.topic });
  await consumer.connect();
  await consumer.subscribe({ topic: a.topic, fromBeginning: true });
  const read = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, 25000);
    consumer.run({
      eachMessage: async ({ message }) => {
        read.push(`${message.key.toString()}=${message.value.toString()}`);
        if (read.length >= 10) { clearTimeout(timer); resolve(); }
      },
    }).catch(reject);
  });
  await consumer.disconnect();
  return { read };
}

main().then(
  (r) => { console.log(JSON.stringify(r)); process.exit(0); },
  (e) => { console.log(JSON.stringify({ error: `${e.name}: ${e.message}` })); process.exit(0); },
);
