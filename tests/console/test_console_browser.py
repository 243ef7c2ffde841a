"""The console in a real browser (Debian's chromium, driven by Playwright) against a real broker:
every page loads without a browser console error, shows the seeded topic's and group's counts,
offsets and lag, shows a produced JSON value, and creates, deletes and resets.

Set LOGBROKER_CONSOLE_SCREENSHOTS=docs/console to refresh the screenshots of docs/console.md.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from console_helpers import (SEED_COMMITTED, SEED_LAG, SEED_PARTITIONS, SEED_PER_PARTITION,
                      ConsoleProcess)

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect
# Locators and expect() work under the console's Content-Security-Policy; wait_for_function
# with a string would need 'unsafe-eval', which the console (rightly) does not allow.
expect.set_options(timeout=15_000)
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium")


@pytest.fixture(scope="module")
def console(seeded_broker):
    with ConsoleProcess(seeded_broker[0]) as process:
        yield process


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    target = os.environ.get("LOGBROKER_CONSOLE_SCREENSHOTS")
    path = Path(target) if target else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


class Page:
    """A browser tab that records console errors and uncaught exceptions."""

    def __init__(self, browser, base_url: str, shots: Path) -> None:
        self.context = browser.new_context(viewport={"width": 1280, "height": 800},
                                           base_url=base_url)
        self.page = self.context.new_page()
        self.page.set_default_timeout(15_000)
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.shots = shots

    def open(self, path: str):
        response = self.page.goto(path)
        assert response.status == 200, f"{path}: {response.status}"
        self.page.wait_for_load_state("networkidle")
        return self.page

    def shot(self, name: str) -> None:
        self.page.screenshot(path=str(self.shots / f"{name}.png"))

    def no_errors(self) -> None:
        assert self.errors == []


@pytest.fixture
def tab(browser, console, shots):
    tab = Page(browser, console.url, shots)
    yield tab
    tab.context.close()
    tab.no_errors()


def cell_texts(page, selector: str) -> list[str]:
    return [t.strip() for t in page.locator(selector).all_inner_texts()]


def produce_for(bootstrap: str, topic: str, seconds: float, per_second: int) -> None:
    """Some steady traffic, so the throughput chart has something to show."""
    import time

    import confluent_kafka
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for i in range(per_second // 10):
            producer.produce(topic, b'{"page": "/checkout", "ms": %d}' % i)
        producer.poll(0)
        time.sleep(0.1)
    producer.flush(10)


def test_overview_shows_brokers_health_and_a_throughput_chart(tab, seeded_broker):
    import threading

    from confluent_kafka.admin import AdminClient, NewTopic
    bootstrap = seeded_broker[0]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("clickstream", 1, 1)])["clickstream"].result(30)
    traffic = threading.Thread(target=produce_for, args=(bootstrap, "clickstream", 4.0, 500))
    traffic.start()
    page = tab.open("/")
    assert page.locator("#brokers tbody tr").count() == 1
    assert "controller" in page.locator("#brokers tbody tr").inner_text()
    total = page.locator(".card:has-text('partitions') .num").inner_text()
    partitions, leaders, log_dir_bytes = cell_texts(page, "#brokers tbody td.n")
    assert [partitions, leaders] == [total, total]  # holds and leads them all
    assert log_dir_bytes.endswith(("B", "KiB", "MiB", "GiB")), log_dir_bytes
    assert page.locator("#under-replicated .num").inner_text() == "0"
    assert page.locator("#offline .num").inner_text() == "0"
    page.locator("#throughput-chart canvas").wait_for()  # two samples, 1 s apart
    traffic.join()
    page.wait_for_timeout(1500)  # the chart's next refresh shows the traffic
    tab.shot("overview")


def test_topics_list_counts_records_and_searches(tab, seeded_broker):
    _, topic, _ = seeded_broker
    page = tab.open("/topics")
    row = page.locator(f'tr[data-topic="{topic}"]')
    cells = [c.strip() for c in row.locator("td").all_inner_texts()]
    assert cells[1:4] == [str(SEED_PARTITIONS), "1", f"{SEED_PARTITIONS * SEED_PER_PARTITION:,}"]
    tab.shot("topics")
    page.fill("#topic-search", "no-topic-has-this-name")
    page.locator("#topics tbody tr").first.wait_for(state="detached")
    assert "No topics match" in page.locator("#topic-list").inner_text()
    page.fill("#topic-search", topic[:8])
    row.wait_for()
    assert "q=" in page.url
    page.fill("#topic-search", "")
    assert page.locator('tr[data-topic="__consumer_offsets"]').count() == 0
    page.check("#show-internal")
    page.locator('tr[data-topic="__consumer_offsets"]').wait_for()


def test_group_pages_show_state_and_lag_and_reset_offsets(tab, seeded_broker):
    _, topic, group = seeded_broker
    page = tab.open("/groups")
    row = page.locator(f'tr[data-group="{group}"]')
    assert "Empty" in row.inner_text()
    assert row.locator("td.lag").inner_text() == str(SEED_LAG)
    tab.shot("groups")

    row.locator("a").click()
    page.wait_for_load_state("networkidle")
    assert page.locator("#total-lag").inner_text() == str(SEED_LAG)
    for partition, committed in SEED_COMMITTED.items():
        cells = cell_texts(page, f'#offsets tr[data-tp="{topic}-{partition}"] td')
        assert cells[2:5] == [str(committed), str(SEED_PER_PARTITION),
                              str(SEED_PER_PARTITION - committed)]
    page.locator("#lag-chart canvas").wait_for()
    tab.shot("group")
    page.goto(f"/topics/{topic}?tab=consumers")
    assert page.locator(f'#consumers tr[data-group="{group}"] td.lag').inner_text() == str(SEED_LAG)
    page.goto(f"/group?id={group}")

    page.click("#reset-offsets summary")
    page.select_option('#reset-offsets select[name="to"]', "earliest")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click('#reset-offsets button[type="submit"]')
    page.wait_for_load_state("networkidle")
    assert f"Reset {SEED_PARTITIONS} partition(s)" in page.locator(".notice").inner_text()
    assert page.locator("#total-lag").inner_text() == str(SEED_PARTITIONS * SEED_PER_PARTITION)


def test_topic_partitions_show_leaders_and_offsets(tab, seeded_broker):
    _, topic, _ = seeded_broker
    page = tab.open(f"/topics/{topic}?tab=partitions")
    rows = page.locator("#partitions tbody tr")
    assert rows.count() == SEED_PARTITIONS
    for p in range(SEED_PARTITIONS):
        cells = cell_texts(page, f'#partitions tr[data-partition="{p}"] td')
        assert cells == [str(p), "0", "0", "0", "0", str(SEED_PER_PARTITION),
                         str(SEED_PER_PARTITION)]
    tab.shot("topic-partitions")


def test_message_browser_shows_newest_first_as_pretty_json_and_pages_by_offset(tab, seeded_broker):
    _, topic, _ = seeded_broker
    page = tab.open(f"/topics/{topic}")
    page.locator("#message-table tbody tr").first.wait_for()
    assert page.locator("#message-table tbody tr").count() == 20
    first = page.locator("#message-table tbody tr").first
    assert '"item": "book"' in first.locator("td.value pre.json").inner_text()
    assert "source: seed" in first.inner_text().replace("\n", " ").replace("  ", " ")
    tab.shot("topic-messages")

    page.select_option('#browse select[name="partition"]', "1")
    page.select_option("#start", "offset")
    page.fill('#browse input[name="offset"]', "5")
    page.select_option('#browse select[name="limit"]', "10")
    page.click('#browse button[type="submit"]')
    rows = page.locator("#message-table tbody tr")
    expect(rows.first).to_have_attribute("data-offset", "5")
    assert [r.get_attribute("data-offset") for r in rows.all()] == [str(o) for o in range(5, 15)]
    page.click("#next-page")
    expect(rows.first).to_have_attribute("data-offset", "15")
    assert page.locator("#message-table tbody tr").count() == 10

    page.select_option("#start", "newest")
    page.select_option('#browse select[name="partition"]', "all")
    page.fill('#browse input[name="filter"]', '"order": 2007')
    page.click('#browse button[type="submit"]')
    expect(page.locator("#message-table tbody tr")).to_have_count(1)
    assert page.locator("#message-table tbody tr").get_attribute("data-partition") == "2"


def test_produce_form_writes_a_json_record_that_the_browser_shows(tab, seeded_broker):
    _, topic, _ = seeded_broker
    page = tab.open(f"/topics/{topic}")
    page.click("#produce summary")
    page.select_option('#produce select[name="partition"]', "1")
    page.fill('#produce input[name="key"]', "console-key")
    page.fill('#produce textarea[name="value"]', '{"hello": "console", "n": [1, 2]}')
    page.fill('#produce textarea[name="headers"]', "origin=test")
    page.click('#produce button[type="submit"]')
    assert page.locator("#produced").inner_text() == (
        f"Produced to partition 1 at offset {SEED_PER_PARTITION}.")
    expect(page.locator("#message-table")).to_contain_text("console-key")
    newest = page.locator("#message-table tbody tr").first
    assert newest.locator("td.value pre.json").inner_text() == (
        '{\n  "hello": "console",\n  "n": [\n    1,\n    2\n  ]\n}')
    assert "origin" in newest.inner_text()


def test_group_page_refreshes_its_lag_by_itself(tab, seeded_broker):
    import confluent_kafka
    bootstrap, topic, group = seeded_broker
    page = tab.open(f"/group?id={group}")
    before = int(page.locator("#total-lag").inner_text().replace(",", ""))
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap})
    for i in range(5):
        producer.produce(topic, b'{"late": %d}' % i, partition=0)
    assert producer.flush(10) == 0
    expect(page.locator("#total-lag")).to_have_text(str(before + 5))
    assert page.locator(f'#offsets tr[data-tp="{topic}-0"] td.lag').inner_text() == str(
        SEED_PER_PARTITION + 5)


def test_config_edit_sets_and_resets_a_topic_config(tab, seeded_broker):
    _, topic, _ = seeded_broker
    page = tab.open(f"/topics/{topic}?tab=configs")
    page.fill('input[name="config.retention.ms"]', "3600000")
    page.click('#configs-form button[type="submit"]')
    assert "Updated retention.ms=3600000." in page.locator(".notice").inner_text()
    assert page.input_value('input[name="config.retention.ms"]') == "3600000"
    assert "DYNAMIC_TOPIC_CONFIG" in page.locator('tr[data-config="retention.ms"]').inner_text()
    tab.shot("topic-configs")
    page.check('tr[data-config="retention.ms"] input[name="reset"]')
    page.click('#configs-form button[type="submit"]')
    assert "retention.ms reset" in page.locator(".notice").inner_text()
    assert page.input_value('input[name="config.retention.ms"]') == "604800000"


def test_create_and_delete_a_topic_with_confirmation(tab):
    page = tab.open("/topics")
    page.click("#create-topic summary")
    page.fill('#create-topic input[name="name"]', "made-in-console")
    page.fill('#create-topic input[name="partitions"]', "4")
    page.fill('#create-topic textarea[name="configs"]', "cleanup.policy=compact")
    page.click('#create-topic button[type="submit"]')
    page.wait_for_load_state("networkidle")
    assert page.url.endswith("/topics/made-in-console?notice=Created+topic+%27made-in-console%27+with+4+partition%28s%29.")
    page.goto("/topics/made-in-console?tab=partitions")
    assert page.locator("#partitions tbody tr").count() == 4
    page.click("#delete-topic summary")
    page.fill('#delete-topic input[name="confirm"]', "wrong-name")
    page.click('#delete-topic button[type="submit"]')
    assert "Type the topic name" in page.locator(".alert").inner_text()
    page.click("#delete-topic summary")
    page.fill('#delete-topic input[name="confirm"]', "made-in-console")
    page.click('#delete-topic button[type="submit"]')
    page.wait_for_load_state("networkidle")
    assert "Deleted topic 'made-in-console'." in page.locator(".notice").inner_text()
    assert page.locator('tr[data-topic="made-in-console"]').count() == 0


def test_delete_a_group_with_confirmation(tab, seeded_broker):
    _, _, group = seeded_broker
    page = tab.open(f"/group?id={group}")
    page.click("#delete-group summary")
    page.fill('#delete-group input[name="confirm"]', group)
    page.click('#delete-group button[type="submit"]')
    page.wait_for_load_state("networkidle")
    assert f"Deleted group '{group}'." in page.locator(".notice").inner_text()
    assert page.locator(f'tr[data-group="{group}"]').count() == 0


def test_security_page_says_when_the_authorizer_is_off(tab):
    page = tab.open("/security")
    assert "no authorizer" in page.locator("#authorizer-off").inner_text()
    assert page.locator("#users").count() == 1


@pytest.fixture(scope="module")
def secured_console(tmp_path_factory):
    """A SASL/PLAIN broker with the ACL authorizer (admin is the super user), and a console that
    reaches it through a --command-config of Kafka client properties."""
    from logbroker.testing import BrokerProcess
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="admin" password="admin-secret" user_admin="admin-secret";')
    base = tmp_path_factory.mktemp("secured")
    broker = BrokerProcess(base, overrides={
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
        "security.inter.broker.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin"}).start()
    config = base / "admin.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                      "sasl.username=admin\nsasl.password=admin-secret\n")
    with ConsoleProcess(broker.bootstrap, "--command-config", str(config)) as console:
        yield console
    broker.kill()


def test_security_page_adds_and_removes_acls_and_scram_users(browser, secured_console, shots):
    tab = Page(browser, secured_console.url, shots)
    page = tab.open("/security")
    page.click("#add-acl summary")
    page.fill('#add-acl input[name="principal"]', "User:alice")
    page.fill('#add-acl input[name="resource_name"]', "orders")
    page.select_option('#add-acl select[name="operation"]', "WRITE")
    page.click('#add-acl button[type="submit"]')
    page.wait_for_load_state("networkidle")
    assert "Added ALLOW WRITE for User:alice on TOPIC 'orders'." in page.locator(".notice").inner_text()
    assert cell_texts(page, "#acls tbody tr td")[:7] == [
        "User:alice", "*", "TOPIC", "orders", "LITERAL", "WRITE", "ALLOW"]

    page.click("#add-user summary")
    page.fill('#add-user input[name="name"]', "bob")
    page.fill('#add-user input[name="password"]', "bob-secret")
    page.click('#add-user button[type="submit"]')
    page.wait_for_load_state("networkidle")
    assert "Set the SCRAM-SHA-256 credential of 'bob'." in page.locator(".notice").inner_text()
    assert cell_texts(page, "#users tbody tr td")[:3] == ["bob", "SCRAM-SHA-256", "8192"]
    tab.shot("security")

    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#acls button")
    page.wait_for_load_state("networkidle")
    assert "Removed ALLOW WRITE" in page.locator(".notice").inner_text()
    assert page.locator("#acls").inner_text().count("User:alice") == 0
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#users button")
    page.wait_for_load_state("networkidle")
    assert "No SCRAM users." in page.locator("#users").inner_text()
    tab.context.close()
    tab.no_errors()
