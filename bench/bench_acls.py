"""ACL benchmark: what one authorization check costs, that it does not grow with the
number of ACLs (the index is a few dict lookups, never a scan), and what the checks cost a broker.

    .venv/bin/python bench/bench_acls.py               # ~1 min
    .venv/bin/python bench/bench_acls.py --no-broker   # ~5 s, the in-process part only

An AclAuthorizer over a file store in a temp dir, filled with N literal topic ACLs for N
principals plus N/10 prefixed ones, then `authorize` timed for: a literal allow, an allow through
a prefix, a denial (no matching ACL; the audit logger's INFO line is off, as in a broker that logs
at WARN), and a super user. The "as produce pays it" row is Produce's per-request work for one
topic (`allowed_names` over a request's topic names) with no authorizer configured: one attribute
test. Prints Markdown for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_metrics import PRODUCER, VALUE, cpu_seconds  # noqa: E402
from common import machine_info, median, per_call_us, say, table  # noqa: E402

from logbroker.metadata.local_store import LocalMetadataStore  # noqa: E402
from logbroker.security.acl import (  # noqa: E402
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from logbroker.security.authorizer import AclAuthorizer  # noqa: E402
from logbroker.testing import BrokerProcess  # noqa: E402

CALLS = 200_000
WRITE, ALLOW = AclOperation.WRITE, AclPermissionType.ALLOW


def filled_authorizer(log_dir: Path, count: int) -> AclAuthorizer:
    authorizer = AclAuthorizer(super_users={"User:admin"})
    authorizer.load(LocalMetadataStore(log_dir))
    bindings = [AclBinding(ResourcePattern(ResourceType.TOPIC, f"topic-{i}"),
                           AccessControlEntry(f"User:u{i}", "*", WRITE, ALLOW)) for i in range(count)]
    bindings += [AclBinding(ResourcePattern(ResourceType.TOPIC, f"team-{i}-", PatternType.PREFIXED),
                            AccessControlEntry(f"User:u{i}", "*", WRITE, ALLOW))
                 for i in range(max(1, count // 10))]
    authorizer.create_acls(bindings)
    return authorizer


def check_costs(tmp: str) -> list[tuple[str, str, str]]:
    rows = []
    for count in (10, 1_000, 10_000):
        say(f"{count} ACLs …")
        log_dir = Path(tmp) / str(count)
        log_dir.mkdir()
        a = filled_authorizer(log_dir, count)
        checks = {
            "literal allow": ("User:u7", "topic-7"),
            "prefixed allow": ("User:u0", "team-0-orders"),
            "denied (no match)": ("User:nobody", "topic-7"),
            "super user": ("User:admin", "topic-7"),
        }
        for label, (principal, name) in checks.items():
            assert a.authorize(principal, "127.0.0.1", WRITE, ResourceType.TOPIC, name) == (
                label != "denied (no match)"), label
            us = per_call_us(lambda _: a.authorize(principal, "127.0.0.1", WRITE,
                                                   ResourceType.TOPIC, name), range(CALLS))
            rows.append((f"{count:,}", label, f"{us:.2f} µs"))
    return rows


JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
SASL = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
        "security.inter.broker.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS}


def produce_run(root: Path, *, acls: bool, records: int) -> dict:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AclBinding as Binding, AdminClient, NewTopic
    from confluent_kafka.admin import AclOperation as Op, AclPermissionType as Perm
    from confluent_kafka.admin import ResourcePatternType as Pattern, ResourceType as Type

    overrides = {**SASL, **({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                             "super.users": "User:admin"} if acls else {})}
    client = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}
    with BrokerProcess(root, overrides=overrides) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, **client,
                             "sasl.username": "admin", "sasl.password": "admin-secret"})
        admin.create_topics([NewTopic("bench", 1, 1)])["bench"].result(30)
        if acls:
            others = [Binding(Type.TOPIC, f"other-{i}", Pattern.LITERAL, f"User:u{i}", "*", Op.WRITE,
                              Perm.ALLOW) for i in range(1_000)]
            mine = Binding(Type.TOPIC, "bench", Pattern.LITERAL, "User:alice", "*", Op.WRITE, Perm.ALLOW)
            for future in admin.create_acls([*others, mine], request_timeout=60).values():
                future.result()
        producer = Producer({"bootstrap.servers": broker.bootstrap, **client, **PRODUCER,
                             "sasl.username": "alice", "sasl.password": "alice-secret"})
        producer.produce("bench", VALUE)  # connect, authenticate: untimed
        assert producer.flush(30) == 0
        cpu_before, started = cpu_seconds(broker.process.pid), time.perf_counter()
        for _ in range(records):
            while True:
                try:
                    producer.produce("bench", VALUE)
                    break
                except BufferError:
                    producer.poll(0.001)
        assert producer.flush(120) == 0
        elapsed, cpu = time.perf_counter() - started, cpu_seconds(broker.process.pid) - cpu_before
        broker.stop()
    return {"records_per_s": records / elapsed, "broker_cpu_s": cpu}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-broker", action="store_true", help="only the in-process checks")
    parser.add_argument("--records", type=int, default=200_000)
    args = parser.parse_args()
    logging.getLogger("kafka.authorizer.logger").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        out = ["## ACL checks (bench/bench_acls.py)", "", *machine_info(tmp).lines(), "",
               table(("ACLs", "check", "per call"), check_costs(tmp))]
        if not args.no_broker:
            runs: dict[bool, list[dict]] = {False: [], True: []}
            for i in range(3):
                for acls in (False, True):
                    say(f"produce run {i + 1}, authorizer {'on' if acls else 'off'} …")
                    runs[acls].append(produce_run(Path(tmp) / f"run-{i}-{acls}", acls=acls,
                                                  records=args.records))
            rows = [(label, f"{median([r['records_per_s'] for r in runs[acls]]):,.0f}",
                     f"{median([r['broker_cpu_s'] for r in runs[acls]]):.2f}")
                    for label, acls in (("off", False), ("on, 1,001 ACLs", True))]
            out += ["", f"Produce, {args.records:,} records of 100 B, SASL_PLAINTEXT, medians of 3:", "",
                    table(("authorizer", "records/s", "broker CPU s"), rows)]
        print("\n".join(out))


if __name__ == "__main__":
    main()
