"""The registry's REST API over plain HTTP against a real broker: Confluent's statuses, error codes
and messages per endpoint, percent-encoded subjects, soft and hard deletes, config, mode."""

from __future__ import annotations

import base64
import json
import uuid
from urllib.parse import quote

import pytest
from google.protobuf import descriptor_pb2
from registry_http import CONTENT_TYPE, Registry

from logbroker.testing import SCHEMA_REGISTRY_OVERRIDES, TEST_OVERRIDES, BrokerProcess

RECORD_V1 = json.dumps({"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]})
RECORD_V2 = json.dumps({"type": "record", "name": "User", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": 0}]})
RECORD_NO_DEFAULT = json.dumps({"type": "record", "name": "User", "fields": [
    {"name": "name", "type": "string"}, {"name": "email", "type": "string"}]})


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("registry"),
                            overrides={**TEST_OVERRIDES, **SCHEMA_REGISTRY_OVERRIDES})
    process.start()
    yield Registry(process.schema_registry_url())
    process.kill()


@pytest.fixture
def subject() -> str:
    return f"s-{uuid.uuid4().hex[:10]}-value"


def enc(subject: str) -> str:
    return quote(subject, safe="")


def test_register_answers_an_id_and_the_same_id_when_registered_again(registry, subject):
    first = registry.register(subject, RECORD_V1)
    assert registry.register(subject, RECORD_V1) == first
    assert registry.register(subject + "-other", RECORD_V1) == first  # same schema, same id
    assert registry.get(f"/subjects/{enc(subject)}/versions") == (200, [1])
    status, body = registry.get(f"/subjects/{enc(subject)}/versions/1")
    assert status == 200
    assert body["subject"] == subject and body["version"] == 1 and body["id"] == first
    assert json.loads(body["schema"]) == json.loads(RECORD_V1)
    assert "schemaType" not in body  # Avro is left out, as Confluent does


def test_answers_carry_the_registry_content_type(registry, subject):
    registry.register(subject, RECORD_V1)
    status, _, headers = registry.call("GET", f"/subjects/{enc(subject)}/versions")
    assert status == 200
    assert {k.lower(): v for k, v in headers.items()}["content-type"] == CONTENT_TYPE


def test_a_subject_with_a_slash_and_other_encoded_characters_is_one_subject(registry):
    subject = f"team/a b%c/{uuid.uuid4().hex[:6]}"
    schema_id = registry.register(subject, RECORD_V1)
    assert subject in registry.get("/subjects")[1]
    status, body = registry.get(f"/subjects/{enc(subject)}/versions/latest")
    assert (status, body["subject"], body["id"]) == (200, subject, schema_id)
    assert registry.get(f"/schemas/ids/{schema_id}/versions")[1].count({"subject": subject, "version": 1}) == 1


def test_lookup_finds_the_version_holding_a_schema(registry, subject):
    schema_id = registry.register(subject, RECORD_V1)
    status, body = registry.post(f"/subjects/{enc(subject)}", {"schema": RECORD_V1})
    assert status == 200
    assert (body["subject"], body["version"], body["id"]) == (subject, 1, schema_id)
    assert registry.post(f"/subjects/{enc(subject)}", {"schema": RECORD_V2}) == \
        (404, {"error_code": 40403, "message": "Schema not found"})
    assert registry.post("/subjects/no-such-subject", {"schema": RECORD_V1}) == \
        (404, {"error_code": 40401, "message": "Subject 'no-such-subject' not found."})


def test_reads_of_what_does_not_exist_answer_confluents_codes(registry, subject):
    registry.register(subject, RECORD_V1)
    assert registry.get("/subjects/nope/versions") == \
        (404, {"error_code": 40401, "message": "Subject 'nope' not found."})
    assert registry.get(f"/subjects/{enc(subject)}/versions/7") == \
        (404, {"error_code": 40402, "message": "Version 7 not found."})
    status, body = registry.get(f"/subjects/{enc(subject)}/versions/zero")
    assert (status, body["error_code"]) == (422, 42202)
    assert body["message"].startswith("The specified version 'zero' is not a valid version id.")
    assert registry.get(f"/subjects/{enc(subject)}/versions/0")[1]["error_code"] == 42202
    assert registry.get("/schemas/ids/987654") == (404, {"error_code": 40403, "message": "Schema 987654 not found"})
    assert registry.get("/schemas/ids/987654/versions")[1]["error_code"] == 40403
    assert registry.get("/schemas/types") == (200, ["JSON", "PROTOBUF", "AVRO"])


def test_ids_list_their_subjects_and_versions(registry, subject):
    schema = json.dumps({"type": "enum", "name": "E" + subject.replace("-", "_"), "symbols": ["A"]})
    schema_id = registry.register(subject, schema)
    registry.register(subject + "-b", schema)
    assert registry.get(f"/schemas/ids/{schema_id}/subjects")[1] == sorted([subject, subject + "-b"])
    versions = registry.get(f"/schemas/ids/{schema_id}/versions")[1]
    assert {"subject": subject, "version": 1} in versions and {"subject": subject + "-b", "version": 1} in versions
    status, body = registry.get(f"/schemas/ids/{schema_id}")
    assert status == 200 and json.loads(body["schema"]) == json.loads(schema)


def test_an_invalid_schema_is_42201_and_nothing_is_stored(registry, subject):
    status, body = registry.post(f"/subjects/{enc(subject)}/versions", {"schema": "{not json"})
    assert (status, body["error_code"]) == (422, 42201)
    status, body = registry.post(f"/subjects/{enc(subject)}/versions", {"schema": RECORD_V1, "schemaType": "XML"})
    assert (status, body["error_code"]) == (422, 42201)
    assert registry.get(f"/subjects/{enc(subject)}/versions")[1]["error_code"] == 40401


def test_bad_requests_are_refused_with_their_http_codes(registry, subject):
    path = f"/subjects/{enc(subject)}/versions"
    assert registry.call("POST", path, raw=b'{"schema": ', content_type="application/json")[0] == 400
    for body in ([], "schema", 5):
        assert registry.post(path, body) == (422, {"error_code": 422, "message": "The request body must be a JSON object"})
        assert registry.put("/config", body)[1]["error_code"] == 422
    for fields in ({"references": 5}, {"id": "7"}, {"schema": 5}, {"schemaType": 1}, {"references": [{"name": 1}]}):
        status, body = registry.post(path, {"schema": '"string"', **fields})
        assert status == 422 and body["error_code"] in (422, 42201), (fields, body)
    assert registry.call("POST", path, raw=b"schema", content_type="text/plain")[:2] == \
        (415, {"error_code": 415, "message": "HTTP 415 Unsupported Media Type"})
    assert registry.get("/no/such/path") == (404, {"error_code": 404, "message": "HTTP 404 Not Found"})
    assert registry.call("PATCH", "/subjects")[0] == 405
    huge = {"schema": json.dumps({"type": "enum", "name": "E", "symbols": ["A"], "doc": "x" * (17 << 20)})}
    status, body = registry.post(path, huge)
    assert (status, body["error_code"]) == (422, 42209)
    assert registry.get(path)[1]["error_code"] == 40401


def test_compatibility_is_checked_on_register_and_on_request(registry, subject):
    registry.register(subject, RECORD_V1)
    status, body = registry.post(f"/subjects/{enc(subject)}/versions", {"schema": RECORD_NO_DEFAULT})
    assert (status, body["error_code"]) == (409, 409)
    assert "incompatible" in body["message"]
    check = f"/compatibility/subjects/{enc(subject)}/versions/latest?verbose=true"
    status, body = registry.post(check, {"schema": RECORD_NO_DEFAULT})
    assert status == 200 and body["is_compatible"] is False and body["messages"]
    assert registry.post(check, {"schema": RECORD_V2}) == (200, {"is_compatible": True, "messages": []})
    assert registry.post(f"/compatibility/subjects/{enc(subject)}/versions", {"schema": RECORD_V2}) == \
        (200, {"is_compatible": True})
    assert registry.post(f"/compatibility/subjects/{enc(subject)}/versions/3", {"schema": RECORD_V2})[1]["error_code"] == 40402
    registry.register(subject, RECORD_V2)
    assert registry.get(f"/subjects/{enc(subject)}/versions") == (200, [1, 2])


def test_soft_then_hard_delete_of_a_version(registry, subject):
    registry.register(subject, RECORD_V1)
    registry.register(subject, RECORD_V2)
    path = f"/subjects/{enc(subject)}/versions/1"
    assert registry.delete(path + "?permanent=true") == (404, {
        "error_code": 40407,
        "message": f"Subject '{subject}' Version 1 was not deleted first before being permanently deleted"})
    assert registry.delete(path) == (200, 1)
    assert registry.get(f"/subjects/{enc(subject)}/versions") == (200, [2])
    assert registry.get(f"/subjects/{enc(subject)}/versions?deleted=true") == (200, [1, 2])
    assert registry.get(path)[1]["error_code"] == 40402
    assert registry.get(path + "?deleted=true")[0] == 200
    assert registry.delete(path)[1]["error_code"] == 40406
    assert registry.delete(path + "?permanent=true") == (200, 1)
    assert registry.get(f"/subjects/{enc(subject)}/versions?deleted=true") == (200, [2])


def test_soft_then_hard_delete_of_a_subject(registry, subject):
    registry.register(subject, RECORD_V1)
    path = f"/subjects/{enc(subject)}"
    assert registry.delete(path + "?permanent=true")[1]["error_code"] == 40405
    assert registry.delete(path) == (200, [1])
    assert subject not in registry.get("/subjects")[1]
    assert subject in registry.get("/subjects?deleted=true")[1]
    assert registry.delete(path)[1]["error_code"] == 40404
    assert registry.delete(path + "?permanent=true") == (200, [1])
    assert subject not in registry.get("/subjects?deleted=true")[1]
    assert registry.get(path + "/versions")[1]["error_code"] == 40401


def test_registering_after_a_soft_delete_keeps_the_id_and_takes_the_next_version(registry, subject):
    schema_id = registry.register(subject, RECORD_V1)
    registry.delete(f"/subjects/{enc(subject)}")
    assert registry.register(subject, RECORD_V1) == schema_id
    assert registry.get(f"/subjects/{enc(subject)}/versions") == (200, [2])


def test_references_are_resolved_and_block_deletes(registry, subject):
    address = json.dumps({"type": "record", "name": "Address", "namespace": "x",
                          "fields": [{"name": "street", "type": "string"}]})
    person = json.dumps({"type": "record", "name": "Person", "namespace": "x",
                         "fields": [{"name": "home", "type": "x.Address"}]})
    registry.register(subject + "-address", address)
    ref = [{"name": "x.Address", "subject": subject + "-address", "version": 1}]
    person_id = registry.register(subject, person, references=ref)
    status, body = registry.get(f"/subjects/{enc(subject)}/versions/1")
    assert body["references"] == ref
    assert registry.get(f"/subjects/{enc(subject + '-address')}/versions/1/referencedby") == (200, [person_id])
    status, body = registry.delete(f"/subjects/{enc(subject + '-address')}/versions/1")
    assert (status, body["error_code"]) == (422, 42206)
    missing = [{"name": "x.Address", "subject": "nobody", "version": 1}]
    status, body = registry.post(f"/subjects/{enc(subject)}-2/versions", {"schema": person, "references": missing})
    assert (status, body["error_code"]) == (422, 42201)


def test_config_global_and_per_subject(registry, subject):
    registry.register(subject, RECORD_V1)
    assert registry.get(f"/config/{enc(subject)}") == (404, {
        "error_code": 40408, "message": f"Subject '{subject}' does not have subject-level compatibility configured"})
    global_level = registry.get("/config")[1]["compatibilityLevel"]
    assert registry.get(f"/config/{enc(subject)}?defaultToGlobal=true")[1]["compatibilityLevel"] == global_level
    assert registry.put(f"/config/{enc(subject)}", {"compatibility": "NONE"}) == (200, {"compatibility": "NONE"})
    assert registry.get(f"/config/{enc(subject)}")[1]["compatibilityLevel"] == "NONE"
    assert registry.register(subject, RECORD_NO_DEFAULT) > 0  # NONE lets it through
    status, body = registry.put(f"/config/{enc(subject)}", {"compatibility": "SIDEWAYS"})
    assert (status, body["error_code"]) == (422, 42203)
    assert registry.delete(f"/config/{enc(subject)}")[0] == 200
    assert registry.get(f"/config/{enc(subject)}")[1]["error_code"] == 40408


def test_readonly_mode_refuses_writes(registry, subject):
    registry.register(subject, RECORD_V1)
    assert registry.put(f"/mode/{enc(subject)}", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    status, body = registry.post(f"/subjects/{enc(subject)}/versions", {"schema": RECORD_V2})
    assert (status, body["error_code"]) == (422, 42205)
    assert registry.delete(f"/subjects/{enc(subject)}")[1]["error_code"] == 42205
    assert registry.put(f"/mode/{enc(subject)}", {"mode": "SOMETIMES"})[1]["error_code"] == 42204
    assert registry.delete(f"/mode/{enc(subject)}") == (200, {"mode": "READONLY"})
    assert registry.get(f"/mode/{enc(subject)}")[1]["error_code"] == 40409
    assert registry.register(subject, RECORD_V2) > 0


def test_import_mode_registers_with_the_given_id_and_later_ids_go_past_it(registry, subject):
    registry.register(subject, RECORD_V1)
    status, body = registry.put(f"/mode/{enc(subject)}", {"mode": "IMPORT"})
    assert (status, body["error_code"]) == (422, 42205)  # the subject has schemas
    imported = subject + "-imported"
    assert registry.put(f"/mode/{enc(imported)}", {"mode": "IMPORT"}) == (200, {"mode": "IMPORT"})
    assert registry.register(imported, RECORD_V1, id=50_000, version=3) == 50_000
    assert registry.get(f"/subjects/{enc(imported)}/versions") == (200, [3])
    status, body = registry.post(f"/subjects/{enc(imported)}/versions", {"schema": RECORD_V2, "id": 50_000})
    assert (status, body["error_code"]) == (422, 42205)  # the id holds another schema
    status, body = registry.post(f"/subjects/{enc(subject)}/versions", {"schema": RECORD_V2, "id": 60_000})
    assert (status, body["error_code"]) == (422, 42205)  # not in import mode
    registry.delete(f"/mode/{enc(imported)}")
    fresh = registry.register(subject + "-fresh", json.dumps({"type": "fixed", "name": "F", "size": 3}))
    assert fresh > 50_000


def test_concurrent_registrations_get_distinct_consecutive_ids(registry, subject):
    from concurrent.futures import ThreadPoolExecutor
    for name in (subject, subject + "-2"):
        registry.put(f"/config/{enc(name)}", {"compatibility": "NONE"})
    schemas = [json.dumps({"type": "enum", "name": f"C{n}_{subject.replace('-', '_')}", "symbols": ["A"]})
               for n in range(80)]
    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(lambda s: registry.register(subject if len(s) % 2 else subject + "-2", s), schemas))
    assert len(set(ids)) == 80
    assert sorted(ids) == list(range(min(ids), min(ids) + 80))


def test_schema_text_endpoints_and_format(registry, subject):
    proto = 'syntax = "proto3";\npackage fmt;\n\nmessage Point {\n  int32 x = 1;\n  int32 y = 2;\n}\n'
    schema_id = registry.register(subject, proto, schemaType="PROTOBUF")
    status, body = registry.get(f"/schemas/ids/{schema_id}")
    assert status == 200 and body["schemaType"] == "PROTOBUF" and "message Point" in body["schema"]
    status, body = registry.get(f"/schemas/ids/{schema_id}?format=serialized")
    descriptor = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(body["schema"]))
    assert descriptor.package == "fmt" and [m.name for m in descriptor.message_type] == ["Point"]
    status, text, _ = registry.call("GET", f"/schemas/ids/{schema_id}/schema")
    assert status == 200 and "message Point" in text
    status, text, _ = registry.call("GET", f"/subjects/{enc(subject)}/versions/1/schema")
    assert status == 200 and "message Point" in text
