"""The schema registry on a ZooKeeper cluster: every broker answers reads, the leader of `_schemas`
writes and the others forward to it, and killing that leader loses no schema and repeats no id."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from logbroker.testing import wait_for

sys.path.insert(0, str(Path(__file__).parent.parent / "schema_registry"))
from registry_http import Registry  # noqa: E402

REGISTRY = {"schema.registry.listeners": "http://127.0.0.1:0", "min.insync.replicas": "2"}


def enum(n: int) -> str:
    return json.dumps({"type": "enum", "name": f"E{n}", "symbols": ["A"]})


@pytest.mark.logbroker_cluster(brokers=3, **REGISTRY)
def test_writes_forward_to_the_leader_and_a_failover_repeats_no_id(logbroker_cluster):
    cluster = logbroker_cluster
    registries = {i: Registry(b.schema_registry_url()) for i, b in cluster.brokers.items()}
    leader = cluster.wait_for_leader("_schemas", 0)
    follower = next(i for i in registries if i != leader)
    registries[leader].put("/config", {"compatibility": "NONE"})

    ids = {n: registries[follower].register("s", enum(n)) for n in range(5)}  # forwarded
    ids.update({n: registries[leader].register("s", enum(n)) for n in range(5, 10)})
    assert sorted(ids.values()) == list(range(1, 11))
    for registry in registries.values():  # every broker reads what the leader wrote
        wait_for(lambda r=registry: r.get("/subjects/s/versions")[1] == list(range(1, 11)),
                 what="every broker to read the ten versions")
        assert registry.get("/schemas/ids/7")[0] == 200

    cluster.kill(leader)
    new_leader = cluster.wait_for_leader("_schemas", 0, not_in={leader})
    survivor = next(i for i in registries if i not in (leader, new_leader))

    def register_more(n: int) -> int | None:
        status, body, _ = registries[survivor].call("POST", "/subjects/s/versions", {"schema": enum(n)})
        return body["id"] if status == 200 else None
    ids.update({n: wait_for(lambda n=n: register_more(n), what=f"registering E{n} after the failover")
                for n in range(10, 15)})
    assert sorted(ids.values()) == list(range(1, 16))  # none lost, none handed out twice
    for n, schema_id in ids.items():
        status, body = registries[new_leader].post("/subjects/s", {"schema": enum(n)})
        assert (status, body["id"]) == (200, schema_id)
