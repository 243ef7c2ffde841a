// KafkaJS against a logbroker: admin, idempotent producer with headers, group consumer, offsets.
// Prints one JSON line with what it saw; the pytest side asserts on it.
const { Kafka, logLevel } = require('kafkajs')

const [broker, topic, groupId] = process.argv.slice(2)
const kafka = new Kafka({ clientId: 'kafkajs-test', brokers: [broker], logLevel: logLevel.ERROR })

async function main () {
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic, numPartitions: 3 }] })
  const producer = kafka.producer({ idempotent: true })
  await producer.connect()
  for (let i = 0; i < 30; i++) {
    await producer.send({ topic, messages: [{ key: `k${i}`, value: `v${i}`, headers: { n: `${i}` } }] })
  }
  const consumer = kafka.consumer({ groupId })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const seen = []
  await new Promise((resolve) => {
    consumer.run({
      eachMessage: async ({ partition, message }) => {
        seen.push({ partition, offset: Number(message.offset), key: message.key.toString(),
                    value: message.value.toString(), n: message.headers.n.toString() })
        if (seen.length === 30) resolve()
      }
    })
  })
  await consumer.disconnect()  // commits what was consumed
  const committed = await admin.fetchOffsets({ groupId, topics: [topic] })
  const ends = await admin.fetchTopicOffsets(topic)
  console.log(JSON.stringify({ seen, committed, ends }))
  await producer.disconnect()
  await admin.disconnect()
}

main().then(() => process.exit(0), (e) => { console.error(e); process.exit(1) })
