"""`logbroker serve --log-level`: levels per component, with Kafka's logger names."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient

from logbroker.testing import BrokerProcess


def test_request_logger_at_debug_logs_each_request_in_kafkas_layout(tmp_path):
    with BrokerProcess(tmp_path, args=("--log-level", "kafka.request.logger=DEBUG")) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.list_topics(timeout=10)
        text = broker.new_log_text()
    request_lines = [line for line in text.splitlines() if line.endswith("(kafka.request.logger)")]
    assert any(" DEBUG Request " in line and "metadata" in line for line in request_lines), text
    assert all(line.startswith("[20") for line in request_lines)


def test_a_component_can_be_quieter_than_the_root(tmp_path):
    with BrokerProcess(tmp_path, args=("--log-level", "kafka.log.LogManager=WARN")) as broker:
        text = broker.new_log_text()
    assert "(kafka.log.LogManager)" not in text
    assert "(kafka.server.KafkaServer)" in text


def test_a_newline_from_a_client_cannot_forge_a_log_line():
    import io
    import logging

    from logbroker.cli.run_broker import OneLineFormatter

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(OneLineFormatter("%(levelname)s %(message)s"))
    logger = logging.getLogger("t.one-line")
    logger.addHandler(handler)
    logger.propagate = False
    logger.warning("Member joined group %s", "g\n[2026-01-01 00:00:00,000] ERROR forged\r\x00")
    assert stream.getvalue() == "WARNING Member joined group g\\n[2026-01-01 00:00:00,000] ERROR forged\\r\\x00\n"
