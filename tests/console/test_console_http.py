"""`logbroker console` over plain HTTP: who may change what (read-only, basic auth off loopback,
same-origin writes), the startup sentences, and a clean stop."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import urllib.request

import pytest
from console_helpers import (SEED_LAG, SEED_PARTITIONS, SEED_PER_PARTITION, ConsoleProcess,
                             get, post)


def run_console(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "logbroker.cli", "console", *args],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


def test_read_only_console_refuses_every_write_and_hides_the_forms(seeded_broker):
    bootstrap, topic, group = seeded_broker
    with ConsoleProcess(bootstrap, "--read-only") as console:
        writes = [("/topics", {"name": "made-read-only", "partitions": "1",
                               "replication_factor": "1"}),
                  (f"/topics/{topic}/produce", {"value": "x"}),
                  (f"/topics/{topic}/configs", {"add": "retention.ms=1000"}),
                  (f"/topics/{topic}/delete", {"confirm": topic}),
                  ("/group/reset", {"id": group, "to": "latest"}),
                  ("/group/delete", {"id": group, "confirm": group}),
                  ("/security/acls", {"principal": "User:a", "resource_name": "t"}),
                  ("/security/users", {"name": "a", "password": "b"})]
        for path, fields in writes:
            status, body = post(console.url + path, fields)
            assert (path, status) == (path, 403)
            assert "read-only" in body
        status, page = get(f"{console.url}/topics")
        assert status == 200 and "read-only" in page and 'id="create-topic"' not in page
        status, page = get(f"{console.url}/topics/{topic}")
        assert 'id="produce"' not in page
        status, page = get(f"{console.url}/group?id={group}")
        assert 'id="reset-offsets"' not in page and 'id="delete-group"' not in page
        status, page = get(f"{console.url}/topics")
        assert "made-read-only" not in page
        status, page = get(f"{console.url}/group?id={group}")
        assert f'id="total-lag">{SEED_LAG}<' in page  # the reset did not happen


def test_listening_off_loopback_needs_credentials():
    result = run_console("--bootstrap-server", "127.0.0.1:1", "--host", "0.0.0.0")
    assert result.returncode == 1
    assert result.stderr.startswith("Error: Listening on 0.0.0.0 serves the console beyond")
    assert len(result.stderr.strip().splitlines()) == 1
    result = run_console("--bootstrap-server", "127.0.0.1:1", "--host", "0.0.0.0",
                         "--user", "ops")
    assert result.returncode == 2 and "LOGBROKER_CONSOLE_PASSWORD" in result.stderr


def test_an_unreachable_cluster_is_one_sentence():
    result = run_console("--bootstrap-server", "127.0.0.1:1", "--port", "0")
    assert result.returncode == 1
    assert result.stderr.startswith("Error: Cannot reach a broker at 127.0.0.1:1")
    assert len(result.stderr.strip().splitlines()) == 1


def test_credentials_are_required_on_every_request_off_loopback(seeded_broker, tmp_path):
    bootstrap, topic, _ = seeded_broker
    password_file = tmp_path / "password"
    password_file.write_text("s3cret\n")
    with ConsoleProcess(bootstrap, "--host", "0.0.0.0", "--user", "ops", "--password-file",
                        str(password_file)) as console:
        local = console.url.replace("0.0.0.0", "127.0.0.1")
        for path in ("/", "/topics", f"/topics/{topic}", "/static/htmx.min.js",
                     "/api/rates.json"):
            status, _ = get(local + path)
            assert (path, status) == (path, 401)
        wrong = "Basic " + base64.b64encode(b"ops:wrong").decode()
        assert get(local + "/topics", headers={"Authorization": wrong})[0] == 401
        assert post(local + "/topics", {"name": "x"}, headers={"Authorization": wrong})[0] == 401
        right = "Basic " + base64.b64encode(b"ops:s3cret").decode()
        status, page = get(local + "/topics", headers={"Authorization": right})
        assert status == 200 and topic in page


def test_a_write_from_another_site_is_refused(seeded_broker):
    bootstrap, topic, _ = seeded_broker
    with ConsoleProcess(bootstrap) as console:
        status, body = post(console.url + "/topics", {"name": "csrf", "partitions": "1",
                                                      "replication_factor": "1"},
                            headers={"Origin": "http://evil.example"})
        assert status == 403 and "another site" in body
        status, _ = post(console.url + f"/topics/{topic}/produce", {"value": "x"},
                         headers={"Sec-Fetch-Site": "cross-site"})
        assert status == 403
        assert "csrf" not in get(console.url + "/topics")[1]


def test_console_stops_cleanly_on_sigterm(seeded_broker):
    console = ConsoleProcess(seeded_broker[0]).start()
    assert console.stop() == 0
    assert "logbroker console stopped." in console.process.stdout.read()


@pytest.mark.parametrize("path", ["/topics/no-such-topic", "/group?id=no-such-group"])
def test_unknown_topic_or_group_is_a_404_page(seeded_broker, path):
    with ConsoleProcess(seeded_broker[0]) as console:
        status, page = get(console.url + path)
    assert status == 404 and ("UNKNOWN_TOPIC_OR_PARTITION" in page or "GROUP_ID_NOT_FOUND" in page)


def test_an_address_in_use_is_one_sentence(seeded_broker):
    import socket
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = run_console("--bootstrap-server", seeded_broker[0], "--port", str(port))
    assert result.returncode == 1
    assert result.stderr.strip() == (f"Error: Cannot listen on 127.0.0.1:{port}: "
                                     "Address already in use.")


def test_reset_offsets_to_latest_and_to_a_timestamp_and_refused_with_members(seeded_broker):
    import re
    import time

    import confluent_kafka
    bootstrap, topic, group = seeded_broker

    def total_lag(console) -> int:
        page = get(f"{console.url}/group?id={group}")[1]
        return int(re.search(r'id="total-lag">([\d,]+)<', page).group(1).replace(",", ""))

    with ConsoleProcess(bootstrap) as console:
        status, _ = post(console.url + "/group/reset", {"id": group, "to": "latest"})
        assert status == 303 and total_lag(console) == 0
        status, _ = post(console.url + "/group/reset", {"id": group, "to": "timestamp",
                                                        "timestamp": "2000-01-01T00:00"})
        assert status == 303 and total_lag(console) == SEED_PARTITIONS * SEED_PER_PARTITION
        status, _ = post(console.url + "/group/reset", {"id": group, "to": "timestamp",
                                                        "timestamp": "2999-01-01T00:00"})
        assert total_lag(console) == 0  # none is that new: the end, as Kafka's tool does

        member = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                           "session.timeout.ms": 6000})
        member.subscribe([topic])
        deadline = time.monotonic() + 30
        while "Stable" not in get(f"{console.url}/group?id={group}")[1]:
            member.poll(0.2)
            assert time.monotonic() < deadline, "the member never joined"
        status, target = post(console.url + "/group/reset", {"id": group, "to": "earliest"})
        _, deleted = post(console.url + "/group/delete", {"id": group, "confirm": group})
        member.close()
        assert status == 303 and "has 1 active member(s): offsets can only be reset when it is " \
            "empty" in target
        assert f"Cannot delete group '{group}'" in deleted and "(NON_EMPTY_GROUP)." in deleted


def test_https_with_a_certificate_and_basic_auth(seeded_broker, tmp_path):
    import ssl
    bootstrap, topic, _ = seeded_broker
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", "/CN=console",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", "console.key",
                    "-out", "console.pem"], cwd=tmp_path, check=True, capture_output=True)
    with ConsoleProcess(bootstrap, "--user", "ops", "--ssl-certfile",
                        str(tmp_path / "console.pem"), "--ssl-keyfile",
                        str(tmp_path / "console.key"),
                        env={"LOGBROKER_CONSOLE_PASSWORD": "s3cret"}) as console:
        assert console.url.startswith("https://127.0.0.1:")
        context = ssl.create_default_context(cafile=str(tmp_path / "console.pem"))
        right = "Basic " + base64.b64encode(b"ops:s3cret").decode()
        request = urllib.request.Request(console.url + "/topics",
                                         headers={"Authorization": right})
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            assert response.status == 200 and topic in response.read().decode()


def test_an_unreadable_certificate_is_one_sentence(tmp_path):
    result = run_console("--ssl-certfile", str(tmp_path / "missing.pem"))
    assert result.returncode == 1
    assert result.stderr.startswith(f"Error: Cannot load the TLS certificate {tmp_path}")
    assert len(result.stderr.strip().splitlines()) == 1


def test_kafka_errors_come_back_as_one_sentence_on_the_page(seeded_broker):
    bootstrap, topic, _ = seeded_broker
    with ConsoleProcess(bootstrap) as console:
        status, target = post(console.url + "/topics", {"name": topic, "partitions": "1",
                                                        "replication_factor": "1"})
        assert status == 303 and target.startswith("/topics?error=")
        assert f"Cannot create topic '{topic}'" in target and "(TOPIC_ALREADY_EXISTS)." in target
        status, target = post(console.url + f"/topics/{topic}/configs",
                              {"config.retention.ms": "not-a-number"})
        assert status == 303 and "Cannot change the configs" in target
        assert "(INVALID_CONFIG)." in target or "(INVALID_REQUEST)." in target
        status, target = post(console.url + "/topics", {"name": "bad", "partitions": "1",
                                                        "replication_factor": "1",
                                                        "configs": "no equals sign"})
        assert "Line 1 is not key=value" in target
        status, body = post(console.url + f"/topics/{topic}/produce",
                            {"value": "x", "partition": "99"})
        assert status == 200 and 'class="alert"' in body and "Cannot produce" in body


def test_record_contents_are_escaped_and_pages_refuse_framing(seeded_broker):
    bootstrap, topic, _ = seeded_broker
    with ConsoleProcess(bootstrap) as console:
        payload = '<img src=x onerror="alert(1)">'
        status, body = post(console.url + f"/topics/{topic}/produce",
                            {"value": payload, "key": "<b>k</b>", "partition": "0"})
        assert "Produced to partition 0" in body
        request = urllib.request.Request(f"{console.url}/topics/{topic}/messages?partition=0"
                                         "&limit=1")
        with urllib.request.urlopen(request, timeout=30) as response:
            page = response.read().decode()
            assert response.headers["X-Frame-Options"] == "DENY"
            assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]
    assert payload not in page and "<b>k</b>" not in page
    assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in page


def test_the_overview_shows_each_brokers_log_dir_bytes(seeded_broker):
    from logbroker.log_dir_usage import log_dir_usage
    from logbroker.webconsole.render import human_bytes

    bootstrap, _, _ = seeded_broker
    [usage] = log_dir_usage(bootstrap)
    size = usage.size_bytes
    assert usage.broker_id == 0 and size > 0 and usage.total_bytes >= usage.usable_bytes > 0
    with ConsoleProcess(bootstrap) as console:
        status, page = get(console.url + "/")
    assert status == 200
    assert f'<td class="n log-dir-bytes">{human_bytes(size)}</td>' in page
