"""Who may do what: HTTP basic auth, read-only mode, and same-origin writes, as one ASGI
middleware in front of every route.

- With credentials set, every request (pages, static files, JSON) needs them: 401 otherwise.
- A write is any method but GET and HEAD. `read_only` refuses each with 403; the pages hide
  their forms too, but the refusal is here, so it holds whatever a client sends.
- A write whose Origin (or Sec-Fetch-Site) says it comes from another site is refused with 403:
  a console on 127.0.0.1 without credentials must not be a target for a page elsewhere that
  posts a form to it (cross-site request forgery).
- Every response forbids framing by other sites and loading scripts from elsewhere
  (SECURITY_HEADERS).
"""

from __future__ import annotations

import base64
import hmac
from dataclasses import dataclass
from urllib.parse import urlsplit

SAFE_METHODS = frozenset({"GET", "HEAD"})
# On every response: no framing by other sites (a console that deletes topics must not be
# clickjacked), scripts and styles only from the console itself (inline for its few handlers),
# no MIME sniffing, no Referer carrying topic or group names to other sites.
SECURITY_HEADERS = [
    (b"content-security-policy", b"default-src 'self'; script-src 'self' 'unsafe-inline'; "
                                 b"style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                                 b"frame-ancestors 'none'; form-action 'self'"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),  # no-referrer would make form posts send Origin: null
]


@dataclass(frozen=True, slots=True)
class Credentials:
    user: str
    password: str

    def check(self, header: str | None) -> bool:
        """Whether an Authorization header carries these credentials (constant-time compare)."""
        if not header or not header.lower().startswith("basic "):
            return False
        try:
            decoded = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return False
        user, sep, password = decoded.partition(":")
        return bool(sep) and (hmac.compare_digest(user.encode(), self.user.encode())
                              & hmac.compare_digest(password.encode(), self.password.encode()))


def cross_site(headers: dict[str, str]) -> bool:
    """Whether a request's own headers say a page on another origin sent it."""
    if headers.get("sec-fetch-site") == "cross-site":
        return True
    origin = headers.get("origin")
    if not origin or origin == "null":
        return origin == "null"
    return urlsplit(origin).netloc.lower() != headers.get("host", "").lower()


class GuardMiddleware:
    def __init__(self, app, *, credentials: Credentials | None, read_only: bool) -> None:
        self.app = app
        self.credentials = credentials
        self.read_only = read_only

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = _with_headers(send)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        if self.credentials is not None and not self.credentials.check(headers.get("authorization")):
            await _plain(send, 401, "Sign in to the logbroker console.",
                         [(b"www-authenticate", b'Basic realm="logbroker console", charset="UTF-8"')])
            return
        if scope["method"] not in SAFE_METHODS:
            if self.read_only:
                await _plain(send, 403, "The console is read-only (--read-only): "
                                        "no changes are made to the cluster.")
                return
            if cross_site(headers):
                await _plain(send, 403, "Refused a change requested by a page of another site.")
                return
        await self.app(scope, receive, send)


def _with_headers(send):
    async def sending(message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), *SECURITY_HEADERS]}
        await send(message)
    return sending


async def _plain(send, status: int, text: str, extra: list[tuple[bytes, bytes]] = ()) -> None:
    body = text.encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()), *extra]})
    await send({"type": "http.response.body", "body": body})
