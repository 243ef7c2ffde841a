"""A Confluent-compatible schema registry served by the broker."""
