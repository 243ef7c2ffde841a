"""logbroker: a Kafka-compatible broker in Python."""
