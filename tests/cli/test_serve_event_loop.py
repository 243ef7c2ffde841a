"""`logbroker serve --event-loop`: uvloop by default, asyncio's own loop on request (the option or
LOGBROKER_EVENT_LOOP, which brokers started by the test fixtures inherit)."""

from __future__ import annotations

import re

from confluent_kafka.admin import AdminClient

from logbroker.testing import BrokerProcess


def served_on(broker: BrokerProcess) -> str:
    """The event loop the broker's startup line names, after a client was answered."""
    AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10)
    match = re.search(r"started in \d+ ms: .*, event loop (\w+)", broker.new_log_text())
    assert match, broker.new_log_text()
    return match.group(1)


def test_broker_runs_on_uvloop_by_default(tmp_path, monkeypatch):
    monkeypatch.delenv("LOGBROKER_EVENT_LOOP", raising=False)
    with BrokerProcess(tmp_path) as broker:
        assert served_on(broker) == "uvloop"


def test_event_loop_option_selects_asyncios_loop(tmp_path, monkeypatch):
    monkeypatch.delenv("LOGBROKER_EVENT_LOOP", raising=False)
    with BrokerProcess(tmp_path, args=("--event-loop", "asyncio")) as broker:
        assert served_on(broker) == "asyncio"


def test_environment_variable_selects_the_loop_of_every_broker_started_after(tmp_path, monkeypatch):
    monkeypatch.setenv("LOGBROKER_EVENT_LOOP", "asyncio")
    with BrokerProcess(tmp_path) as broker:
        assert served_on(broker) == "asyncio"
