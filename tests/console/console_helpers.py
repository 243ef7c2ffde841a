"""What the console tests share: `ConsoleProcess` runs `logbroker console` as a user would, on a
free port; `seed` fills a broker with a known topic and group; `get`/`post` talk HTTP.

(A module of its own, not conftest.py: test modules import it, and `conftest` is a module name
every test directory has.)"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic


LISTENING = re.compile(r"listening on (https?://\S+)")
# The seeded topic: 3 partitions × 40 JSON records; the group has committed 10, 20 and 40.
SEED_PARTITIONS = 3
SEED_PER_PARTITION = 40
SEED_COMMITTED = {0: 10, 1: 20, 2: 40}
SEED_LAG = sum(SEED_PER_PARTITION - c for c in SEED_COMMITTED.values())


class ConsoleProcess:
    def __init__(self, bootstrap: str, *args: str, env: dict[str, str] | None = None) -> None:
        self.command = [sys.executable, "-m", "logbroker.cli", "console", "--bootstrap-server",
                        bootstrap, "--port", "0", "--sample-interval", "1", *args]
        self.env = {**os.environ, **(env or {})}
        self.process: subprocess.Popen | None = None
        self.url = ""

    def start(self) -> ConsoleProcess:
        self.process = subprocess.Popen(self.command, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, env=self.env)
        line = self.process.stdout.readline()
        match = LISTENING.search(line)
        if match is None:
            self.process.kill()
            raise RuntimeError(f"console did not start: {line}{self.process.stdout.read()}")
        self.url = match.group(1)
        return self

    def stop(self) -> int:
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(5)

    def __enter__(self) -> ConsoleProcess:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()


def seed(bootstrap: str, topic: str, group: str) -> None:
    """`topic` with SEED_PER_PARTITION JSON records in each partition, and `group` with the
    SEED_COMMITTED offsets (committed without joining: the group is Empty)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, SEED_PARTITIONS, 1)])[topic].result(30)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for partition in range(SEED_PARTITIONS):
        for i in range(SEED_PER_PARTITION):
            value = {"order": partition * 1000 + i, "item": "book", "qty": i % 5 + 1}
            producer.produce(topic, json.dumps(value).encode(), key=f"o-{partition}-{i}".encode(),
                             partition=partition, headers=[("source", b"seed")])
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                         "enable.auto.commit": False})
    consumer.commit(offsets=[confluent_kafka.TopicPartition(topic, p, o)
                             for p, o in SEED_COMMITTED.items()], asynchronous=False)
    consumer.close()


def get(url: str, *, headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def post(url: str, fields: dict[str, str], *, headers: dict[str, str] | None = None
         ) -> tuple[int, str]:
    data = urllib.parse.urlencode(fields).encode()
    request = urllib.request.Request(url, data=data, method="POST", headers=headers or {})

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        if 300 <= e.code < 400:  # the redirect's target: where the page's notice or error is
            return e.code, urllib.parse.unquote_plus(e.headers["Location"])
        return e.code, e.read().decode()
