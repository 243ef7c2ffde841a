"""Security benchmark: what TLS and SASL cost, produce and consume, on one broker.

    .venv/bin/python bench/bench_security.py                 # 250k × 1 KiB, 500k × 100 B; ~4 min idle
    .venv/bin/python bench/bench_security.py --quick         # half the volume
    .venv/bin/python bench/bench_security.py --wait-idle 600 # first wait for an idle machine

One `logbroker serve` subprocess with three listeners — PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512,
the user bootstrapped with `logbroker users --config`) — and a throwaway CA made with openssl.
For each record size of bench/bench_broker.py (1 KiB and 100 B) and each listener, interleaved,
2 runs each (medians): produce `count` records to a fresh 1-partition topic (acks=1, linger.ms=5,
batch.size=65536, as bench_broker), then consume them back with the Python consumer (assign at
OFFSET_BEGINNING, bench_ceilings' consumer settings) and with kcat (librdkafka's C consumer, the
same settings). Records/s, payload MB/s, and the broker's CPU seconds per GB of log
(utime+stime from /proc/<pid>/stat).

Ceilings, same run: `openssl speed -evp aes-256-gcm` (TLS 1.3's default cipher between these
clients and the broker: TLS_AES_256_GCM_SHA384), and a Python ssl socket copy over 127.0.0.1
(one thread sends, one receives, both in this process; the GIL is released in SSL_read/write).
PLAINTEXT fetches go by sendfile; SSL and SASL_SSL fetches are read, encrypted in the event
loop and written (server/network.py), so the consume rows show what TLS costs without sendfile.

Each run is repeated (up to --tries, default 4, waiting up to 20 s for an idle machine between
tries) when other processes used more than 25% of a core meanwhile (bench_ceilings.undisturbed);
"rest" in the tables is that share, the largest over a row's runs.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_broker import QUICK, log_bytes, proc_cpu_s  # noqa: E402
from bench_ceilings import (  # noqa: E402
    CONSUMER_SETTINGS,
    GB,
    MB,
    QUIET,
    MachineCpu,
    consume_loop,
    cpu_seconds_self,
    make_producer,
    produce_loop,
    undisturbed,
    wait_idle,
)
from common import MiB, is_tmpfs, machine_info, median, say, table, write_json  # noqa: E402

from logbroker.testing import BrokerProcess  # noqa: E402

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_SSL")
CLIENTS = ("python", "kcat")
KCAT_SETTINGS = ("fetch.max.bytes", "max.partition.fetch.bytes", "receive.message.max.bytes",
                 "queued.min.messages", "queued.max.messages.kbytes")
REPS = 2
USER, PASSWORD = "bench", "bench-secret"
TLS_COPY_BYTES = 512 * MiB
TRY_WAIT_S = 20.0  # the longest wait for an idle machine between two tries of a case


# --- setup ------------------------------------------------------------------------------------

def make_pki(d: Path) -> tuple[Path, Path]:
    """A CA and a broker key+certificate for 127.0.0.1 (EC P-256); returns (ca, keystore)."""
    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=bench-ca")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", "broker.key", "-out", "broker.csr", "-subj", "/CN=localhost")
    (d / "broker.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "broker.pem", "-days", "2", "-extfile", "broker.ext")
    keystore = d / "keystore.pem"
    keystore.write_text((d / "broker.key").read_text() + (d / "broker.pem").read_text())
    return d / "ca.pem", keystore


def start_broker(root: Path, ca: Path, keystore: Path) -> tuple[BrokerProcess, dict[str, dict]]:
    """The broker, and each listener's client config."""
    properties = root / "server.properties"
    properties.write_text(f"log.dirs={root / 'broker' / 'data'}\n")
    subprocess.run([sys.executable, "-m", "logbroker.cli", "users", "--config", str(properties),
                    "--add-scram", f"SCRAM-SHA-512=[name={USER},password={PASSWORD}]"],
                   check=True, capture_output=True)
    broker = BrokerProcess(root / "broker", config_file=properties, overrides={
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "ssl.keystore.location": str(keystore), "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "group.initial.rebalance.delay.ms": "0"}).start()
    line = re.search(r"listening on (.*?), log dirs", broker.new_log_text())[1]
    ports = {name: int(port) for name, port in re.findall(r"(\w+)://[^:,\s]+:(\d+)", line)}
    tls = {"ssl.ca.location": str(ca)}
    sasl = {"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": USER, "sasl.password": PASSWORD}
    configs = {p: {"bootstrap.servers": f"127.0.0.1:{ports[p]}", "security.protocol": p} for p in PROTOCOLS}
    configs["SSL"].update(tls)
    configs["SASL_SSL"].update(tls | sasl)
    return broker, configs


# --- the cases --------------------------------------------------------------------------------

def produce_case(broker: BrokerProcess, config: dict, protocol: str, size: int, count: int,
                 attempt: int) -> dict:
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"{protocol.lower()}-{size}b-{attempt}-{time.monotonic_ns()}"
    admin = AdminClient({**QUIET, **config})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)
    producer, errors = make_producer({**config, "acks": 1})
    value = os.urandom(size)
    producer.produce(topic, value)  # connect, authenticate, learn the leader: untimed
    producer.flush(30)
    pid = broker.process.pid
    cpu0 = proc_cpu_s(pid)
    with MachineCpu() as machine:
        wall, client_cpu = produce_loop(producer, topic, value, count)
    broker_cpu = proc_cpu_s(pid) - cpu0
    del producer
    if errors:
        raise RuntimeError(f"{topic}: {len(errors)} failed deliveries, first: {errors[0]}")
    nbytes = log_bytes(broker.data_dir, topic)
    return {"protocol": protocol, "topic": topic, "size": size, "count": count, "wall_s": wall,
            "msgs_s": count / wall, "mb_s": count * size / wall / MB,
            "broker_cpu_s_per_gb": broker_cpu / (nbytes / GB),
            "rest_cpu_pct": machine.busy_pct - 100 * (broker_cpu + client_cpu) / wall}


def consume_case(broker: BrokerProcess, config: dict, protocol: str, topic: str, size: int,
                 count: int, client: str) -> dict:
    """Read the produce case's topic back (count + 1 records: its untimed first one too)."""
    pid = broker.process.pid
    nbytes = log_bytes(broker.data_dir, topic)
    cpu0 = proc_cpu_s(pid)
    with MachineCpu() as machine:
        if client == "python":
            wall, client_cpu, payload = consume_loop(config["bootstrap.servers"], [(topic, 0)], count + 1,
                                                     extra={k: v for k, v in config.items() if k != "bootstrap.servers"})
        else:
            wall, client_cpu = kcat_consume(config, topic, count + 1)
            payload = (count + 1) * size
    broker_cpu = proc_cpu_s(pid) - cpu0
    return {"protocol": protocol, "client": client, "size": size, "count": count + 1, "wall_s": wall,
            "msgs_s": (count + 1) / wall, "mb_s": payload / wall / MB,
            "broker_cpu_s_per_gb": broker_cpu / (nbytes / GB),
            "rest_cpu_pct": machine.busy_pct - 100 * (broker_cpu + client_cpu) / wall}


def kcat_consume(config: dict, topic: str, count: int) -> tuple[float, float]:
    """kcat -C (librdkafka's C consumer) from the beginning until `count` records, with the
    listener's client config and bench_ceilings' consumer settings; (wall s, kcat's CPU s)."""
    settings = {**{k: CONSUMER_SETTINGS[k] for k in KCAT_SETTINGS}, **config}
    cmd = ["kcat", "-C", "-q", "-t", topic, "-p", "0", "-o", "beginning", "-c", str(count), "-f", "%o\n"]
    cmd += [arg for key, value in settings.items() for arg in ("-X", f"{key}={value}")]
    before, start = os.times(), time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"kcat exited with {done.returncode}: {done.stderr.decode(errors='replace')[-500:]}")
    lines = done.stdout.count(b"\n")
    wall, after = time.perf_counter() - start, os.times()
    if lines != count:
        raise RuntimeError(f"kcat printed {lines} records, expected {count}")
    return wall, (after.children_user - before.children_user) + (after.children_system - before.children_system)


# --- ceilings ---------------------------------------------------------------------------------

def openssl_speed(cipher: str = "aes-256-gcm", seconds: int = 2) -> dict:
    """`openssl speed -evp <cipher>` on one core: MB/s per block size (16 KiB is a TLS record)."""
    out = subprocess.run(["openssl", "speed", "-seconds", str(seconds), "-evp", cipher],
                         capture_output=True, text=True, check=True).stdout
    row = next(line for line in out.splitlines() if line.lower().startswith(cipher.lower()))
    blocks = [16, 64, 256, 1024, 8192, 16384]
    values = [float(v.rstrip("k")) * 1000 / 1e6 for v in row.split()[1:]]  # openssl's "k" is 1000 B
    return {"cipher": cipher, "mb_s": dict(zip(blocks, values))}


def tls_loopback(ca: Path, keystore: Path, nbytes: int = TLS_COPY_BYTES) -> dict:
    """Copy `nbytes` through a Python ssl socket pair over 127.0.0.1, 1 MiB writes."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(keystore)
    client_ctx = ssl.create_default_context(cafile=str(ca))
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    got = [0]

    def receive() -> None:
        conn, _ = listener.accept()
        with server_ctx.wrap_socket(conn, server_side=True) as tls:
            buf = memoryview(bytearray(MiB))
            while got[0] < nbytes:
                n = tls.recv_into(buf)
                if n == 0:
                    break
                got[0] += n

    receiver = threading.Thread(target=receive)
    receiver.start()
    with client_ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)),
                                server_hostname="localhost") as tls:
        cipher = tls.cipher()[0]
        chunk = os.urandom(MiB)
        cpu0, start = cpu_seconds_self(), time.perf_counter()
        with MachineCpu() as machine:
            for _ in range(nbytes // MiB):
                tls.sendall(chunk)
            receiver.join()
        wall, cpu = time.perf_counter() - start, cpu_seconds_self() - cpu0
    listener.close()
    if got[0] != nbytes:
        raise RuntimeError(f"ssl loopback: received {got[0]} of {nbytes} bytes")
    return {"cipher": cipher, "bytes": nbytes, "mb_s": nbytes / wall / MB,
            "cpu_s_per_gb": cpu / (nbytes / GB), "rest_cpu_pct": machine.busy_pct - 100 * cpu / wall}


# --- the run ----------------------------------------------------------------------------------

def run(root: Path, counts: dict[int, int], tries: int = 4) -> dict:
    with MachineCpu() as before:
        time.sleep(2)
    results: dict = {"machine_busy_before_pct": before.busy_pct, "load_avg": os.getloadavg()}
    ca, keystore = make_pki(root)
    say("ceilings: openssl speed, ssl loopback")
    results["openssl"] = openssl_speed()
    results["ssl_loopback"] = undisturbed(lambda attempt: tls_loopback(ca, keystore), attempts=tries, wait_s=TRY_WAIT_S)
    broker, configs = start_broker(root, ca, keystore)
    results["produce"], results["consume"] = [], []
    try:
        for size, count in counts.items():
            for rep in range(REPS):
                for protocol in PROTOCOLS:
                    say(f"{protocol}: produce {count} × {size} B (run {rep + 1})")
                    produced = undisturbed(lambda attempt: produce_case(
                        broker, configs[protocol], protocol, size, count, attempt), attempts=tries, wait_s=TRY_WAIT_S)
                    results["produce"].append(produced)
                    for client in CLIENTS:
                        say(f"{protocol}: consume {count} × {size} B with {client} (run {rep + 1})")
                        results["consume"].append(undisturbed(lambda attempt: consume_case(
                            broker, configs[protocol], protocol, produced["topic"], size, count, client),
                            attempts=tries, wait_s=TRY_WAIT_S))
    finally:
        broker.stop()
    return results


def _rows(runs: list[dict]) -> list[list[str]]:
    rows, base = [], {}
    for size, client in dict.fromkeys((r["size"], r.get("client", "")) for r in runs):
        for protocol in PROTOCOLS:
            mine = [r for r in runs if r["size"] == size and r["protocol"] == protocol and r.get("client", "") == client]
            msgs, mb = median([r["msgs_s"] for r in mine]), median([r["mb_s"] for r in mine])
            base.setdefault((size, client), mb)
            rows.append([f"{size} B", *([client] if client else []), protocol, f"{msgs:,.0f}", f"{mb:.1f}",
                         f"{100 * mb / base[size, client]:.0f}%",
                         f"{median([r['broker_cpu_s_per_gb'] for r in mine]):.2f}",
                         f"{max(r['rest_cpu_pct'] for r in mine):.0f}%"])
    return rows


def report(machine, args, results: dict, elapsed: float) -> str:
    headers = ["record", "listener", "records/s", "MB/s", "of PLAINTEXT", "broker CPU-s/GB", "rest (max)"]
    o, lb = results["openssl"], results["ssl_loopback"]
    runs = [*results["produce"], *results["consume"]]
    out = ["Machine:", *machine.lines(),
           f"- load average at start: {' '.join(f'{x:.2f}' for x in results['load_avg'])}; "
           f"busy before the run: {results['machine_busy_before_pct']:.0f}% of one core",
           f"- command: `.venv/bin/python bench/bench_security.py {' '.join(sys.argv[1:])}` ({elapsed:.0f} s)",
           f"- runs still disturbed after every try (rest > 25% of a core): "
           f"{sum(r['disturbed'] for r in runs)} of {len(runs)}", "",
           f"Produce (acks=1, medians of {REPS}):", "", table(headers, _rows(results["produce"])), "",
           f"Consume (medians of {REPS}):", "", table([*headers[:1], "client", *headers[1:]],
                                                     _rows(results["consume"])), "",
           "Ceilings, same run:", "",
           table(["what", "MB/s", "CPU-s/GB", "rest"], [
               [f"openssl speed -evp {o['cipher']}, 16 KiB blocks, one core", f"{o['mb_s'][16384]:,.0f}",
                f"{GB / (o['mb_s'][16384] * MB):.2f}", ""],
               [f"Python ssl socket copy over loopback ({lb['cipher']}, both ends, 1 MiB writes)",
                f"{lb['mb_s']:,.0f}", f"{lb['cpu_s_per_gb']:.2f}", f"{lb['rest_cpu_pct']:.0f}%"]]), ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="half the volume")
    parser.add_argument("--dir", type=Path, default=None, help="parent of the data directory")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument("--tries", type=int, default=4,
                        help="runs of a case while others disturb it (more than 25%% of a core)")
    parser.add_argument("--wait-idle", type=float, default=0, metavar="SECONDS",
                        help="first wait up to this long for the machine to be idle (<15%% of a core busy)")
    args = parser.parse_args(argv)
    counts = {size: n // (2 if args.quick else 1) for size, n in QUICK.produce_counts.items()}
    if args.wait_idle:
        say(f"waiting up to {args.wait_idle:.0f} s for an idle machine")
        wait_idle(args.wait_idle)
    root = Path(tempfile.mkdtemp(prefix="logbroker-bench-security-", dir=args.dir))
    if is_tmpfs(root):
        shutil.rmtree(root)
        parser.error(f"{root.parent} is tmpfs; pick --dir on a disk")
    machine = machine_info(root)
    say("\n".join(machine.lines()))
    started = time.perf_counter()
    try:
        results = run(root, counts, args.tries)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    elapsed = time.perf_counter() - started
    print(report(machine, args, results, elapsed))
    if args.json:
        write_json(args.json, machine, {"quick": args.quick, **results, "elapsed_s": elapsed})
    return 0


if __name__ == "__main__":
    sys.exit(main())
