// A KafkaJS transactional producer: one transaction committed with offsets sent to it, one
// aborted. Prints the committed offset of the group as JSON. Usage: node transactions.js <bootstrap> <topic> <group>
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [bootstrap, topic, group] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "kafkajs-txn", brokers: [bootstrap], logLevel: logLevel.ERROR });
  const admin = kafka.admin();
  await admin.connect();
  const producer = kafka.producer({ transactionalId: `${topic}-txn`, idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();

  const committed = await producer.transaction();
  await committed.send({ topic, messages: [{ key: "k", value: "committed" }] });
  await committed.sendOffsets({ consumerGroupId: group, topics: [{ topic, partitions: [{ partition: 0, offset: "7" }] }] });
  await committed.commit();

  const aborted = await producer.transaction();
  await aborted.send({ topic, messages: [{ key: "k", value: "aborted" }] });
  await aborted.abort();

  const offsets = await admin.fetchOffsets({ groupId: group, topics: [topic] });
  await producer.disconnect();
  await admin.disconnect();
  console.log(JSON.stringify({ offsets }));
}

main().catch((e) => { console.error(e); process.exit(1); });
