"""`logbroker schemas` against a real broker serving the schema registry."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from logbroker.cli.main import main

V1 = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
V2 = {**V1, "fields": V1["fields"] + [{"name": "note", "type": "string", "default": ""}]}
BAD = {**V1, "fields": V1["fields"] + [{"name": "qty", "type": "int"}]}


@pytest.fixture
def run(logbroker_schema_registry):
    url = logbroker_schema_registry.schema_registry_url()

    def run(*args: str, code: int = 0) -> str:
        result = CliRunner().invoke(main, ["schemas", "--url", url, *args])
        assert result.exit_code == code, result.output
        return result.output
    return run


def test_register_show_check_config_and_delete(run, tmp_path):
    for name, schema in (("v1", V1), ("v2", V2), ("bad", BAD)):
        (tmp_path / f"{name}.avsc").write_text(json.dumps(schema))
    assert run("register", "orders/value", "--schema", str(tmp_path / "v1.avsc")) == "Registered orders/value: id 1\n"
    assert run("register", "orders/value", "--schema", str(tmp_path / "v1.avsc")) == "Registered orders/value: id 1\n"
    assert run("subjects") == "orders/value\n"
    assert json.loads(run("show", "orders/value"))["id"] == 1
    assert json.loads(json.loads(run("show", "--id", "1"))["schema"]) == V1
    assert run("check", "orders/value", "--schema", str(tmp_path / "v2.avsc")) == "Compatible\n"
    output = run("check", "orders/value", "--schema", str(tmp_path / "bad.avsc"), code=1)
    assert output.startswith("Incompatible:\n") and "qty" in output
    output = run("register", "orders/value", "--schema", str(tmp_path / "bad.avsc"), code=1)
    assert "error code 409, HTTP 409" in output
    assert run("register", "orders/value", "--schema", str(tmp_path / "v2.avsc")) == "Registered orders/value: id 2\n"
    versions = run("versions", "orders/value").splitlines()
    assert versions[0].split() == ["VERSION", "ID", "TYPE", "REFERENCES"]
    assert [line.split() for line in versions[1:]] == [["1", "1", "AVRO", "0"], ["2", "2", "AVRO", "0"]]
    assert json.loads(run("config", "orders/value", "--set", "full")) == {"compatibility": "FULL"}
    assert json.loads(run("config", "orders/value"))["compatibilityLevel"] == "FULL"
    assert json.loads(run("mode", "--set", "readonly")) == {"mode": "READONLY"}
    assert "is in read-only mode (error code 42205, HTTP 422)" in run("delete", "orders/value", code=1)
    run("mode", "--set", "READWRITE")
    assert run("delete", "orders/value", "--version", "1") == "Deleted orders/value version 1\n"
    assert run("delete", "orders/value") == "Deleted orders/value versions 2\n"
    assert run("delete", "orders/value", "--permanent") == "Permanently deleted orders/value versions 1, 2\n"
    assert "Subject 'orders/value' not found. (error code 40401, HTTP 404)" in run("show", "orders/value", code=1)


def test_an_unreachable_registry_is_one_sentence(tmp_path):
    result = CliRunner().invoke(main, ["schemas", "--url", "http://127.0.0.1:9", "subjects"])
    assert result.exit_code == 1
    assert result.output.startswith("Error: Cannot reach the schema registry at http://127.0.0.1:9")
