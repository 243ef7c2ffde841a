"""moto's S3 server counting the requests it receives, for bench/bench_tiered.py; and the floor:
the same bytes PUT to it and read back with obstore alone, nothing of ours in between.

    .venv/bin/python bench/s3_requests.py      # serves on 127.0.0.1, prints its address

The server runs in its own process (started by `CountingS3Server`) so that moto's Python work
does not share a GIL with the benchmark's consumer, and its CPU time is its own. Counting is a
WSGI middleware around moto's application, in the server's threads: it sees each request as the
store receives it — method, query, and the Range and x-amz-copy-source headers — adds no network
hop and moves no byte. (A counting reverse proxy would see the same requests but push every byte
through one more Python socket loop on the same cores; moto's access log, werkzeug's, shows
neither Range nor copy headers.) `GET /__counts` answers the counts so far as JSON and is not
counted.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path
from urllib.parse import parse_qs

COUNTS_PATH = "/__counts"

# S3 Standard request prices (us-east-1): class A (PUT, COPY, POST, LIST) $0.005 per 1,000,
# class B (GET, HEAD) $0.0004 per 1,000; DELETE and multipart abort are free.
CLASS_A = ("PUT", "multipart start", "multipart part", "multipart complete", "COPY", "LIST", "PUT bucket")
CLASS_B = ("GET", "GET ranged", "HEAD")
PRICE_PER_1000 = {"A": 0.005, "B": 0.0004}


def request_kind(environ: dict) -> str:
    """What an S3 request is, from its method, path (path-style: /bucket[/key]), query and headers."""
    method = environ["REQUEST_METHOD"]
    query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
    has_key = len(environ.get("PATH_INFO", "/").strip("/").split("/", 1)) == 2
    if method == "PUT":
        if "partNumber" in query:
            return "multipart part"
        if environ.get("HTTP_X_AMZ_COPY_SOURCE"):
            return "COPY"
        return "PUT" if has_key else "PUT bucket"
    if method == "POST":
        if "uploads" in query:
            return "multipart start"
        if "uploadId" in query:
            return "multipart complete"
        return "DELETE batch" if "delete" in query else "POST"
    if method == "GET":
        if not has_key:
            return "LIST"
        return "GET ranged" if environ.get("HTTP_RANGE") else "GET"
    if method == "DELETE":
        return "multipart abort" if "uploadId" in query else "DELETE"
    return method


def counting(app, counts: Counter, lock: threading.Lock):
    """`app` counting each request by kind, and each answer of status >= 400 as `<kind> <status>`."""
    def wrapped(environ, start_response):
        if environ.get("PATH_INFO") == COUNTS_PATH:
            with lock:
                body = json.dumps(counts).encode()
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        kind = request_kind(environ)

        def counted_start(status, headers, *exc_info):
            with lock:
                counts[kind] += 1
                if int(status.split(" ", 1)[0]) >= 400:
                    counts[f"{kind} {status.split(' ', 1)[0]}"] += 1
            return start_response(status, headers, *exc_info)
        return app(environ, counted_start)
    return wrapped


def serve() -> None:
    """Serve moto's S3 with counting on a free port of 127.0.0.1; print `http://host:port`."""
    import logging

    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto logs every request
    app = counting(DomainDispatcherApplication(create_backend_app), Counter(), threading.Lock())
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=MotoRequestHandler)
    host, port = server.server_address[:2]
    print(f"http://{host}:{port}", flush=True)
    server.serve_forever()


class CountingS3Server:
    """The counting moto server as a child process: `endpoint`, `counts()`, `pid`, `stop()` (or use
    it as a context manager)."""

    def __init__(self) -> None:
        self._process = subprocess.Popen([sys.executable, __file__], stdout=subprocess.PIPE, text=True)
        self.endpoint = self._process.stdout.readline().strip()
        if not self.endpoint.startswith("http://"):
            self.stop()
            raise RuntimeError("the moto server did not start")
        self.pid = self._process.pid

    def counts(self) -> Counter:
        with urllib.request.urlopen(self.endpoint + COUNTS_PATH, timeout=30) as response:
            return Counter(json.loads(response.read()))

    def stop(self) -> None:
        self._process.terminate()
        self._process.wait(30)

    def __enter__(self) -> CountingS3Server:
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()


def classes(counts: Counter) -> tuple[int, int]:
    """(class A, class B) requests among `counts` (errors are counted in their kind already)."""
    return sum(counts[k] for k in CLASS_A), sum(counts[k] for k in CLASS_B)


def dollars(counts: Counter) -> float:
    a, b = classes(counts)
    return a / 1000 * PRICE_PER_1000["A"] + b / 1000 * PRICE_PER_1000["B"]


def floor(endpoint: str, bucket: str, files: list[Path], *, part_bytes: int, parts_in_flight: int,
          range_bytes: int) -> tuple[float, float, int]:
    """(PUT MB/s, GET MB/s, bytes): `files` uploaded one after another with obstore (multipart in
    `part_bytes` parts, `parts_in_flight` at a time, as the broker uploads a segment), then read
    back one after another in ranged GETs of `range_bytes` (as a remote replay reads)."""
    import obstore
    from obstore.store import S3Store

    store = S3Store(bucket, config={"endpoint": endpoint, "region": "us-east-1"},
                    client_options={"allow_http": True})

    async def run() -> tuple[float, float, int]:
        total = sum(f.stat().st_size for f in files)
        start = time.perf_counter()
        for f in files:
            await obstore.put_async(store, f.name, f, chunk_size=part_bytes, max_concurrency=parts_in_flight)
        put_s = time.perf_counter() - start
        start = time.perf_counter()
        for f in files:
            size = f.stat().st_size
            for offset in range(0, size, range_bytes):
                await obstore.get_range_async(store, f.name, start=offset, end=min(size, offset + range_bytes))
        get_s = time.perf_counter() - start
        return total / 1e6 / put_s, total / 1e6 / get_s, total

    return asyncio.run(run())


if __name__ == "__main__":
    serve()
