"""The decoder alone under the fuzz cases (no broker, so many more per second): every frame either
decodes into a body that respects its schema — no None where the field is not nullable, at any depth —
or is refused with one of the codec's typed errors. Nothing else may escape."""

from __future__ import annotations

import dataclasses
import os

from kafka_fuzz import FuzzCases

from logbroker.errors import KafkaError
from logbroker.protocol.codec import decode_request
from logbroker.protocol.errors import UnsupportedApiVersionsRequest
from logbroker.protocol.guard import is_nullable, resolved_fields

SEED = int(os.environ.get("FUZZ_SEED", "1"))
COUNT = int(os.environ.get("FUZZ_COUNT", "3000")) * 3


def schema_violations(value, path: str) -> list[str]:  # noqa: ANN001
    """Fields holding None although their type is not nullable."""
    if not dataclasses.is_dataclass(value):
        return []
    found = []
    for field in resolved_fields(type(value)):
        item = getattr(value, field.name)
        where = f"{path}.{field.name}"
        if item is None:
            if not is_nullable(field.type):
                found.append(where)
        elif isinstance(item, tuple):
            for i, element in enumerate(item):
                if element is None:
                    found.append(f"{where}[{i}]")
                found += schema_violations(element, f"{where}[{i}]")
        else:
            found += schema_violations(item, where)
    return found


def test_every_decoded_body_respects_its_schema_and_every_refusal_is_typed():
    cases = FuzzCases(SEED, ["fuzz-0", "fuzz-1"])
    decoded = refused = 0
    for index in range(COUNT):
        case = cases.case(index)
        try:
            request = decode_request(memoryview(case.frame[4:]))
        except (KafkaError, UnsupportedApiVersionsRequest):
            refused += 1
            continue
        decoded += 1
        violations = schema_violations(request.body, type(request.body).__name__)
        assert not violations, f"seed {SEED}, {case.describe()}: None in {violations}"
    assert decoded and refused
