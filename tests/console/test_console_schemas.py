"""The console's Schemas page and its message browser decoding registry-framed values, against a
real broker serving the schema registry, with confluent-kafka's serializers writing the records.
Over HTTP and in Debian's chromium (Playwright)."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from console_helpers import ConsoleProcess, get

from logbroker.testing import SCHEMA_REGISTRY_OVERRIDES, TEST_OVERRIDES, BrokerProcess

USER_V1 = {"type": "record", "name": "User", "namespace": "example",
           "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}]}
USER_V2 = {**USER_V1, "fields": USER_V1["fields"] + [
    {"name": "email", "type": ["null", "string"], "default": None}]}
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def registry_setup(tmp_path_factory):
    """A broker serving the registry; a topic with two Avro versions, a JSON value and a raw
    one; a subject with a '/' in its name. Yields (broker, topic)."""
    broker = BrokerProcess(tmp_path_factory.mktemp("console-registry"),
                           overrides={**TEST_OVERRIDES, **SCHEMA_REGISTRY_OVERRIDES})
    broker.start()
    try:
        broker.registry_url = broker.schema_registry_url()
        topic = f"users-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        registry = SchemaRegistryClient({"url": broker.registry_url})
        context = SerializationContext(topic, MessageField.VALUE)
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
        v1 = AvroSerializer(registry, json.dumps(USER_V1))
        v2 = AvroSerializer(registry, json.dumps(USER_V2))
        producer.produce(topic, v1({"name": "ada", "age": 36}, context))
        producer.produce(topic, v2({"name": "alan", "age": 41, "email": "alan@example.com"},
                                   context))
        producer.produce(topic, b"plain text")
        json_serializer = JSONSerializer(json.dumps({"type": "object", "properties": {
            "sku": {"type": "string"}}}), registry, conf={"auto.register.schemas": True})
        producer.produce(topic, json_serializer({"sku": "A-1"}, SerializationContext(
            "team/a.orders", MessageField.VALUE)))  # registered under "team/a.orders-value"
        assert producer.flush(10) == 0
        registry.set_compatibility("team/a.orders-value", "FULL")
        yield broker, topic
    finally:
        broker.kill()


@pytest.fixture(scope="module")
def console(registry_setup):
    broker, _ = registry_setup
    with ConsoleProcess(broker.bootstrap, "--schema-registry-url", broker.registry_url) as process:
        yield process


def test_schemas_page_lists_subjects_with_latest_version_and_levels(console, registry_setup):
    _, topic = registry_setup
    status, page = get(console.url + "/schemas")
    assert status == 200
    assert f'<tr data-subject="{topic}-value">' in page
    assert '<tr data-subject="team/a.orders-value">' in page
    row = page.split(f'<tr data-subject="{topic}-value">')[1].split("</tr>")[0]
    assert "<td>AVRO</td>" in row and '<td class="n">2</td>' in row
    assert '<span class="badge" id="global-level">BACKWARD</span>' in page


def test_subject_page_shows_two_versions_side_by_side(console, registry_setup):
    _, topic = registry_setup
    status, page = get(console.url + f"/schemas/subject?name={topic}-value")
    assert status == 200
    assert "Version 1 (id" in page and "beside version 2" in page
    assert "(the global level)" in page and 'id="subject-level">BACKWARD<' in page
    inserted = [row for row in page.split("<tr class=")[1:] if row.startswith('"insert"')
                or row.startswith('"replace"')]
    assert any("&#34;email&#34;" in row or '"email"' in row for row in inserted)
    status, same = get(console.url + f"/schemas/subject?name={topic}-value&left=2&right=2")
    assert status == 200 and "0 lines differ" in same


def test_subject_with_a_slash_and_its_own_level(console):
    status, page = get(console.url + "/schemas/subject?name=team%2Fa.orders-value")
    assert status == 200
    assert 'id="subject-level">FULL<' in page and "(the global level)" not in page
    assert "sku" in page


def test_unknown_subject_or_version_is_a_404_page(console, registry_setup):
    _, topic = registry_setup
    status, page = get(console.url + "/schemas/subject?name=no-such-subject")
    assert status == 404 and "40401" in page
    status, page = get(console.url + f"/schemas/subject?name={topic}-value&left=9")
    assert status == 404 and "no version 9" in page


def test_message_browser_shows_framed_values_decoded(console, registry_setup):
    _, topic = registry_setup
    status, page = get(console.url + f"/topics/{topic}/messages?start=oldest")
    assert status == 200
    assert "&#34;name&#34;: &#34;ada&#34;" in page and "&#34;age&#34;: 36" in page
    assert "&#34;email&#34;: &#34;alan@example.com&#34;" in page
    assert "&#34;sku&#34;: &#34;A-1&#34;" in page and "json schema" in page
    assert page.count("avro schema") == 2
    assert '<pre class="text">plain text</pre>' in page
    status, raw = get(console.url + f"/topics/{topic}/messages?start=oldest&format=hex")
    assert "avro schema" not in raw and "&#34;ada&#34;" not in raw


def test_schemas_page_without_a_registry_says_how_to_get_one(registry_setup):
    broker, _ = registry_setup
    with ConsoleProcess(broker.bootstrap) as plain:
        status, page = get(plain.url + "/schemas")
    assert status == 200 and 'id="no-registry"' in page and "--schema-registry-url" in page


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium")
def test_schemas_pages_in_a_browser(console, registry_setup, tmp_path):
    import os

    sync_api = pytest.importorskip("playwright.sync_api")
    _, topic = registry_setup
    shots = Path(os.environ.get("LOGBROKER_CONSOLE_SCREENSHOTS") or tmp_path)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 800}, base_url=console.url)
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto("/schemas")
        page.click(f'tr[data-subject="{topic}-value"] a')
        sync_api.expect(page.locator("#schema-diff tbody tr.insert, #schema-diff tbody tr.replace")
                        .first).to_be_visible()
        assert "email" in page.locator("#schema-diff td.right").all_inner_texts().__str__()
        page.screenshot(path=str(shots / "schemas-diff.png"))
        page.select_option("#left-version", "2")
        page.click('#compare button[type="submit"]')
        sync_api.expect(page.locator("#diff-summary")).to_contain_text("0 lines differ")
        page.goto(f"/topics/{topic}")
        value = page.locator("#message-table tbody tr td.value").filter(has_text="alan@example.com")
        sync_api.expect(value.locator("pre.json")).to_contain_text('"email": "alan@example.com"')
        sync_api.expect(value).to_contain_text("avro schema")
        browser.close()
    assert errors == []
