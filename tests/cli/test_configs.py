"""`logbroker configs` (kafka-configs.sh) against a real broker: every entity type round-trips —
topic configs, broker configs, quotas of users, clients, both and defaults, SCRAM credentials —
with Kafka's output lines and its refusals."""

from __future__ import annotations

import subprocess
import sys

import pytest

from logbroker.cli.configs import ConfigCommandError, java_double, parse_add_config

pytestmark = pytest.mark.timeout(120)


def configs(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "logbroker.cli", "configs", "--bootstrap-server", bootstrap, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=90)


def ok(bootstrap: str, *args: str) -> list[str]:
    done = configs(bootstrap, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_add_config_is_split_as_kafka_splits_it():
    assert parse_add_config("a=1,b=[x,y],c=d=e".replace("c=d=e", "c=[d=e]")) == {"a": "1", "b": "x,y", "c": "d=e"}
    assert parse_add_config("SCRAM-SHA-256=[iterations=8192,password=pw]") == {
        "SCRAM-SHA-256": "iterations=8192,password=pw"}
    with pytest.raises(ConfigCommandError):
        parse_add_config("novalue")


@pytest.mark.parametrize(("value", "text"), [(1024.0, "1024.0"), (12.5, "12.5"), (10485760.0, "1.048576E7"),
                                             (0.0001, "1.0E-4")])
def test_quota_values_print_as_java_doubles(value, text):
    assert java_double(value) == text


def test_topic_configs_round_trip(shared_broker, topic):
    b = shared_broker.bootstrap
    subprocess.run([sys.executable, "-m", "logbroker.cli", "topics", "--bootstrap-server", b, "--create",
                    "--topic", topic], check=True, capture_output=True, timeout=60)
    assert ok(b, "--alter", "--entity-type", "topics", "--entity-name", topic,
              "--add-config", "retention.ms=60000,cleanup.policy=[compact,delete]") == [
        f"Completed updating config for topic {topic}."]
    assert ok(b, "--describe", "--entity-type", "topics", "--entity-name", topic) == [
        f"Dynamic configs for topic {topic} are:",
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, "
        "DEFAULT_CONFIG:log.cleanup.policy=delete}",
        "  retention.ms=60000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=60000}"]
    assert ok(b, "--alter", "--topic", topic, "--delete-config", "retention.ms,cleanup.policy") == [
        f"Completed updating config for topic {topic}."]
    assert ok(b, "--describe", "--topic", topic) == [f"Dynamic configs for topic {topic} are:"]
    every = ok(b, "--describe", "--topic", topic, "--all")
    assert every[0] == f"All configs for topic {topic} are:"
    assert "  retention.ms=604800000 sensitive=false synonyms={}" in every  # as Kafka: no log.retention.ms set
    refused = configs(b, "--alter", "--topic", topic, "--delete-config", "segment.ms")
    assert (refused.returncode, refused.stderr.strip()) == (1, "Invalid config(s): segment.ms")


def test_broker_configs_are_described_and_read_only_ones_refused(shared_broker):
    b = shared_broker.bootstrap
    assert ok(b, "--describe", "--entity-type", "brokers") == [
        "Dynamic configs for broker 0 are:", "Default configs for brokers in the cluster are:"]
    every = ok(b, "--describe", "--entity-type", "brokers", "--entity-name", "0", "--all")
    assert every[0] == "All configs for broker 0 are:"
    assert any(line.startswith("  num.partitions=1 sensitive=false synonyms={") for line in every)
    for target in (["--entity-name", "0"], ["--entity-default"]):
        refused = configs(b, "--alter", "--entity-type", "brokers", *target, "--add-config", "num.partitions=3")
        assert refused.returncode == 1
        assert "Cannot update these configs dynamically: Set(num.partitions)" in refused.stderr
        assert "(INVALID_REQUEST)" in refused.stderr


def test_broker_configs_altered_per_broker_and_as_the_cluster_default(broker):
    assert ok(broker, "--alter", "--entity-type", "brokers", "--entity-name", "0",
              "--add-config", "log.cleaner.backoff.ms=2000,max.connections.per.ip.overrides=[127.0.0.2:5]") == [
        "Completed updating config for broker 0."]
    assert ok(broker, "--alter", "--broker-defaults", "--add-config", "log.segment.bytes=2000000") == [
        "Completed updating default config for brokers in the cluster."]
    assert ok(broker, "--describe", "--entity-type", "brokers") == [
        "Dynamic configs for broker 0 are:",
        "  log.cleaner.backoff.ms=2000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.backoff.ms=2000, "
        "DEFAULT_CONFIG:log.cleaner.backoff.ms=15000}",
        "  max.connections.per.ip.overrides=127.0.0.2:5 sensitive=false "
        "synonyms={DYNAMIC_BROKER_CONFIG:max.connections.per.ip.overrides=127.0.0.2:5, "
        "DEFAULT_CONFIG:max.connections.per.ip.overrides=}",
        "Default configs for brokers in the cluster are:",
        "  log.segment.bytes=2000000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.segment.bytes=2000000, "
        "DEFAULT_CONFIG:log.segment.bytes=1073741824}"]
    assert ok(broker, "--alter", "--entity-type", "brokers", "--entity-name", "0",
              "--delete-config", "log.cleaner.backoff.ms,max.connections.per.ip.overrides") == [
        "Completed updating config for broker 0."]
    assert ok(broker, "--describe", "--entity-type", "brokers", "--entity-name", "0") == [
        "Dynamic configs for broker 0 are:"]


def test_quotas_of_users_clients_both_and_defaults_round_trip(shared_broker):
    b = shared_broker.bootstrap
    assert ok(b, "--alter", "--entity-type", "users", "--entity-name", "quota-user",
              "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2048") == [
        "Completed updating config for user quota-user."]
    assert ok(b, "--alter", "--entity-type", "users", "--entity-name", "quota-user", "--entity-type", "clients",
              "--entity-default", "--add-config", "request_percentage=12.5") == [
        "Completed updating config for user quota-user."]
    assert ok(b, "--alter", "--entity-type", "clients", "--entity-name", "quota-app",
              "--add-config", "controller_mutation_rate=10") == ["Completed updating config for client quota-app."]
    assert ok(b, "--alter", "--client-defaults", "--add-config", "consumer_byte_rate=10485760") == [
        "Completed updating default config for clients in the cluster."]
    assert ok(b, "--describe", "--entity-type", "users", "--entity-name", "quota-user") == [
        "Quota configs for user-principal 'quota-user' are consumer_byte_rate=2048.0, producer_byte_rate=1048576.0"]
    assert ok(b, "--describe", "--entity-type", "users", "--entity-name", "quota-user", "--entity-type", "clients") == [
        "Quota configs for user-principal 'quota-user', the default client-id are request_percentage=12.5"]
    clients = ok(b, "--describe", "--entity-type", "clients")
    assert "Quota configs for client-id 'quota-app' are controller_mutation_rate=10.0" in clients
    assert "Quota configs for the default client-id are consumer_byte_rate=1.048576E7" in clients
    assert ok(b, "--alter", "--user", "quota-user", "--delete-config", "consumer_byte_rate") == [
        "Completed updating config for user quota-user."]
    assert ok(b, "--describe", "--user", "quota-user") == [
        "Quota configs for user-principal 'quota-user' are producer_byte_rate=1048576.0"]
    for args in (["--alter", "--user", "quota-user", "--delete-config", "consumer_byte_rate"],
                 ["--alter", "--client", "quota-app", "--add-config", "producer_byte_rate=abc"],
                 ["--alter", "--client", "quota-app", "--add-config", "retention.ms=1"],
                 ["--alter", "--client", "quota-app", "--add-config", "producer_byte_rate=0"]):
        assert configs(b, *args).returncode == 1
    assert "Invalid config(s): consumer_byte_rate" in configs(
        b, "--alter", "--user", "quota-user", "--delete-config", "consumer_byte_rate").stderr
    assert "must be greater than 0 (INVALID_REQUEST)" in configs(
        b, "--alter", "--client", "quota-app", "--add-config", "producer_byte_rate=0").stderr
    ok(b, "--alter", "--client-defaults", "--delete-config", "consumer_byte_rate")


def test_scram_credentials_round_trip_beside_quotas(shared_broker):
    b = shared_broker.bootstrap
    assert ok(b, "--alter", "--entity-type", "users", "--entity-name", "scram-alice",
              "--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=pw]") == [
        "Completed updating config for user scram-alice."]
    ok(b, "--alter", "--user", "scram-alice", "--add-config", "producer_byte_rate=4096")
    assert ok(b, "--describe", "--entity-type", "users", "--entity-name", "scram-alice") == [
        "Quota configs for user-principal 'scram-alice' are producer_byte_rate=4096.0",
        "SCRAM credential configs for user-principal 'scram-alice' are SCRAM-SHA-256=iterations=8192, "
        "SCRAM-SHA-512=iterations=4096"]
    ok(b, "--alter", "--user", "scram-alice", "--delete-config", "SCRAM-SHA-512")
    assert ok(b, "--describe", "--user", "scram-alice")[1] == (
        "SCRAM credential configs for user-principal 'scram-alice' are SCRAM-SHA-256=iterations=8192")
    both = configs(b, "--alter", "--user", "scram-alice", "--add-config",
                   "SCRAM-SHA-256=[password=x],producer_byte_rate=1")
    assert both.returncode == 1 and "Cannot alter both quota and SCRAM credential configs" in both.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--describe"], "At least one entity type must be specified"),
    (["--entity-type", "topics"], "Command must include exactly one action"),
    (["--describe", "--entity-type", "topics", "--entity-type", "users"], "Only 'users' and 'clients'"),
    (["--describe", "--entity-type", "groups"], "Invalid entity type groups"),
    (["--alter", "--entity-type", "users", "--add-config", "producer_byte_rate=1"], "An entity name must be specified"),
    (["--describe", "--entity-type", "brokers", "--entity-name", "x"], "must be a valid integer broker id"),
])
def test_invalid_commands_print_kafkas_message(shared_broker, args, message):
    done = configs(shared_broker.bootstrap, *args)
    assert done.returncode == 1 and message in done.stderr


def test_add_config_file(shared_broker, tmp_path):
    properties = tmp_path / "quota.properties"
    properties.write_text("consumer_byte_rate=4096\nrequest_percentage=25\n")
    b = shared_broker.bootstrap
    assert ok(b, "--alter", "--client", "file-app", "--add-config-file", str(properties),
              "--add-config", "request_percentage=30") == ["Completed updating config for client file-app."]
    assert ok(b, "--describe", "--client", "file-app") == [
        "Quota configs for client-id 'file-app' are consumer_byte_rate=4096.0, request_percentage=30.0"]
