"""The pytest plugin users get with `pip install logbroker`: a project of their own, with no
conftest, asks for the `logbroker` fixture and talks to a real broker with confluent-kafka."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_a_project_of_its_own_uses_the_fixture(tmp_path):
    (tmp_path / "test_app.py").write_text(textwrap.dedent('''
        import confluent_kafka

        def test_roundtrip(logbroker):
            producer = confluent_kafka.Producer({"bootstrap.servers": logbroker})
            producer.produce("orders", b"42", key=b"k")
            assert producer.flush(10) == 0
            consumer = confluent_kafka.Consumer({"bootstrap.servers": logbroker, "group.id": "app",
                                                 "auto.offset.reset": "earliest"})
            consumer.subscribe(["orders"])
            message = None
            for _ in range(50):
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    break
            consumer.close()
            assert (message.key(), message.value(), message.offset()) == (b"k", b"42", 0)
    '''))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
