"""A plain HTTP client for the registry tests: every answer's status and decoded JSON body, with
no client library's retries or error mapping in between."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class Registry:
    def __init__(self, url: str, *, user: str | None = None, password: str | None = None) -> None:
        self.url = url.rstrip("/")
        self.auth = None if user is None else \
            "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    def call(self, method: str, path: str, body=None, *, content_type: str = CONTENT_TYPE,
             raw: bytes | None = None) -> tuple[int, object, dict]:
        """(status, JSON body, headers) of `method path`; `path` is sent as given (encoded)."""
        data = raw if raw is not None else None if body is None else json.dumps(body).encode()
        headers = {"Accept": CONTENT_TYPE}
        if data is not None:
            headers["Content-Type"] = content_type
        if self.auth:
            headers["Authorization"] = self.auth
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, payload, answer_headers = response.status, response.read(), dict(response.headers)
        except urllib.error.HTTPError as exc:
            status, payload, answer_headers = exc.code, exc.read(), dict(exc.headers)
        try:
            decoded = json.loads(payload) if payload else None
        except ValueError:
            decoded = payload.decode()
        return status, decoded, answer_headers

    def get(self, path: str):
        return self.call("GET", path)[:2]

    def post(self, path: str, body):
        return self.call("POST", path, body)[:2]

    def put(self, path: str, body):
        return self.call("PUT", path, body)[:2]

    def delete(self, path: str):
        return self.call("DELETE", path)[:2]

    def register(self, subject: str, schema: str, **fields) -> int:
        """Register and return the id (the test fails on any other answer)."""
        from urllib.parse import quote
        status, body = self.post(f"/subjects/{quote(subject, safe='')}/versions", {"schema": schema, **fields})
        assert status == 200, (status, body)
        return body["id"]
