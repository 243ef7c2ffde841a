"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's ScramSaslServer speaks them,
and the client side a broker uses to authenticate to another (ScramSaslClient).

Credentials are kept as Kafka keeps them (ScramCredential): salt, stored_key, server_key and
iterations — never the password. From a password:

    salted_password = Hi(password, salt, i)    PBKDF2-HMAC with the mechanism's hash
    client_key      = HMAC(salted_password, "Client Key")
    stored_key      = H(client_key)
    server_key      = HMAC(salted_password, "Server Key")

The exchange, two round trips:

    client-first  n,[a=authzid],n=user,r=cnonce[,ext]
    server-first  r=cnonce+snonce,s=base64(salt),i=iterations
    client-final  c=base64(gs2 header),r=cnonce+snonce,p=base64(client_proof)
    server-final  v=base64(HMAC(server_key, auth_message))

where auth_message = client-first-bare + "," + server-first + "," + client-final-without-proof,
and the server checks H(client_proof XOR HMAC(stored_key, auth_message)) == stored_key. The text
form of a credential, `salt=…,stored_key=…,server_key=…,iterations=…` (base64), is Kafka's
ScramCredentialUtils format, the value of a mechanism in /config/users/<name>.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

from logbroker.security.sasl import SaslAuthenticationFailed, SaslFailed

MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096

# Mechanism name → (hash name, the int8 AlterUserScramCredentials calls it by).
MECHANISMS = {"SCRAM-SHA-256": ("sha256", 1), "SCRAM-SHA-512": ("sha512", 2)}
MECHANISM_BY_TYPE = {code: name for name, (_, code) in MECHANISMS.items()}


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_text(self) -> str:
        b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
        return (f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},"
                f"server_key={b64(self.server_key)},iterations={self.iterations}")

    @classmethod
    def from_text(cls, text: str) -> ScramCredential:
        """Parse Kafka's text form; ValueError when a part is missing or malformed."""
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        try:
            return cls(base64.b64decode(fields["salt"], validate=True),
                       base64.b64decode(fields["stored_key"], validate=True),
                       base64.b64decode(fields["server_key"], validate=True),
                       int(fields["iterations"]))
        except (KeyError, ValueError) as exc:
            raise ValueError(f"not a SCRAM credential ({exc})") from None


class ScramFormatter:
    """The hash functions of one mechanism."""

    def __init__(self, mechanism: str) -> None:
        self.mechanism = mechanism
        self.hash_name = MECHANISMS[mechanism][0]

    def hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self.hash_name).digest()

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode(), salt, iterations)

    def credential_from_salted(self, salted_password: bytes, salt: bytes, iterations: int) -> ScramCredential:
        client_key = self.hmac(salted_password, b"Client Key")
        return ScramCredential(salt, self.hash(client_key),
                               self.hmac(salted_password, b"Server Key"), iterations)

    def credential(self, password: str, *, iterations: int = DEFAULT_ITERATIONS,
                   salt: bytes | None = None) -> ScramCredential:
        salt = salt if salt is not None else secrets.token_bytes(32)
        return self.credential_from_salted(self.salted_password(password, salt, iterations), salt, iterations)

    def password_matches(self, password: str, credential: ScramCredential) -> bool:
        """Whether `password` produced `credential` (lets PLAIN check against the SCRAM store)."""
        salted = self.salted_password(password, credential.salt, credential.iterations)
        return hmac.compare_digest(self.credential_from_salted(salted, credential.salt,
                                                               credential.iterations).stored_key,
                                   credential.stored_key)


_CLIENT_FIRST = re.compile(r"(?P<gs2>[yn],(?:a=(?P<authzid>[^,]*))?,)"
                           r"(?P<bare>n=(?P<name>[^,]*),r=(?P<nonce>[^,]+)(?P<extensions>(?:,[^,]*)*))")
_CLIENT_FINAL = re.compile(r"(?P<without_proof>c=(?P<binding>[^,]*),r=(?P<nonce>[^,]*)(?:,[^,]*)*?),"
                           r"p=(?P<proof>[^,]+)")


def sasl_name_to_username(name: str) -> str:
    """RFC 5802's saslname: ',' and '=' are sent as '=2C' and '=3D'."""
    if re.search(r"=(?!2C|3D)", name):
        raise ValueError("invalid escape in SCRAM user name")
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramSaslServer:
    """One SCRAM exchange, server side. `evaluate(token)` → the next server message, raising
    SaslFailed (generic message to the client) or SaslAuthenticationFailed (message passed on)."""

    def __init__(self, mechanism: str, lookup, *, token_lookup=None, clock_ms=None) -> None:
        self.formatter = ScramFormatter(mechanism)
        self.mechanism = mechanism
        self._lookup = lookup  # username → ScramCredential | None
        # Delegation tokens (`tokenauth=true`): token id → (owner, ScramCredential, expiry ms) or
        # None; `clock_ms` is wall-clock time, which token expiry is in. None: tokens refused.
        self._token_lookup = token_lookup
        self._clock_ms = clock_ms
        self.token_authenticated = False
        self._token_expiry_ms: int | None = None
        self._state = "client-first"
        self.username: str | None = None
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._gs2 = ""

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslFailed("SCRAM message is not UTF-8") from None
        if self._state == "client-first":
            return self._client_first(text)
        if self._state == "client-final":
            return self._client_final(text)
        raise SaslFailed(f"Unexpected SCRAM message in state {self._state}")

    def _client_first(self, text: str) -> bytes:
        match = _CLIENT_FIRST.fullmatch(text)
        if match is None:
            raise SaslFailed("Invalid SCRAM client first message format")
        try:
            username = sasl_name_to_username(match["name"])
        except ValueError as exc:
            raise SaslFailed(str(exc)) from None
        authzid = match["authzid"]
        if authzid and authzid != username:
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username")
        extensions = dict(e.partition("=")[::2] for e in match["extensions"].split(",") if e)
        if extensions.get("tokenauth", "false").lower() == "true":
            token = self._token_lookup(username) if self._token_lookup is not None else None
            if token is None:
                raise SaslFailed("Authentication failed: Invalid user credentials")
            username, credential, self._token_expiry_ms = token  # the principal is the token's owner
            self.token_authenticated = True
        else:
            credential = self._lookup(username)
        if credential is None:
            raise SaslFailed("Authentication failed: Invalid user credentials")
        if credential.iterations < MIN_ITERATIONS:
            raise SaslFailed(f"Iterations {credential.iterations} is less than the minimum "
                             f"{MIN_ITERATIONS} for {self.mechanism}")
        self.username, self._credential, self._gs2 = username, credential, match["gs2"]
        self._nonce = match["nonce"] + secrets.token_urlsafe(24)
        self._client_first_bare = match["bare"]
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._state = "client-final"
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        self._state = "failed"
        match = _CLIENT_FINAL.fullmatch(text)
        if match is None:
            raise SaslFailed("Invalid SCRAM client final message format")
        # Kafka 3.9 checks endsWith, not equality: librdkafka before 2.6.1 (kcat's, Debian's)
        # sends the client nonce twice, cnonce + (cnonce + snonce). The server nonce must be there.
        if not match["nonce"].endswith(self._nonce):
            raise SaslFailed("Invalid client nonce in the final client message.")
        try:
            binding = base64.b64decode(match["binding"], validate=True)
            proof = base64.b64decode(match["proof"], validate=True)
        except ValueError:
            raise SaslFailed("Invalid base64 in the SCRAM client final message") from None
        if binding != self._gs2.encode():
            raise SaslFailed("Invalid channel binding in the SCRAM client final message")
        f, credential = self.formatter, self._credential
        auth_message = ",".join((self._client_first_bare, self._server_first,
                                 match["without_proof"])).encode()
        client_signature = f.hmac(credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise SaslFailed("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature))
        if not hmac.compare_digest(f.hash(client_key), credential.stored_key):
            raise SaslFailed("Invalid client credentials")
        if self._token_expiry_ms is not None and self._token_expiry_ms < self._clock_ms():
            raise SaslAuthenticationFailed("Authentication failed: Delegation Token expired")
        self._state = "complete"
        server_signature = f.hmac(credential.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)


class ScramSaslClient:
    """One SCRAM exchange, client side (a broker authenticating to another): `first_message()`,
    then `final_message(server_first)`, then `verify(server_final)`. Raises SaslFailed when the
    server's answers are malformed, lower the iteration count below the minimum, drop our nonce,
    or (last step) do not prove the server knows the password's keys."""

    def __init__(self, mechanism: str, username: str, password: str, *, token_auth: bool = False) -> None:
        self.formatter = ScramFormatter(mechanism)
        self._password = password
        self._nonce = secrets.token_urlsafe(24)
        name = username.replace("=", "=3D").replace(",", "=2C")
        # A delegation token: user name the token id, password its base64 HMAC, and the
        # `tokenauth=true` extension, as Kafka's Java client sends with sasl.jaas.config tokenauth=true.
        extension = ",tokenauth=true" if token_auth else ""
        self._client_first_bare = f"n={name},r={self._nonce}{extension}"
        self._server_signature = b""

    def first_message(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def final_message(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8", "replace")
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        try:
            nonce, salt, iterations = fields["r"], base64.b64decode(fields["s"], validate=True), int(fields["i"])
        except (KeyError, ValueError):
            raise SaslFailed(f"Invalid SCRAM server first message {text[:60]!r}") from None
        if not nonce.startswith(self._nonce) or nonce == self._nonce:
            raise SaslFailed("The SCRAM server nonce does not extend the client nonce")
        if iterations < MIN_ITERATIONS:
            raise SaslFailed(f"SCRAM iterations {iterations} is below the minimum {MIN_ITERATIONS}")
        f = self.formatter
        salted = f.salted_password(self._password, salt, iterations)
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        auth_message = ",".join((self._client_first_bare, text, without_proof)).encode()
        client_key = f.hmac(salted, b"Client Key")
        client_signature = f.hmac(f.hash(client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, client_signature))
        self._server_signature = f.hmac(f.hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        text = server_final.decode("utf-8", "replace")
        if text.startswith("e="):
            raise SaslFailed(f"SCRAM authentication failed: {text[2:]}")
        expected = b"v=" + base64.b64encode(self._server_signature)
        if not self._server_signature or not hmac.compare_digest(server_final, expected):
            raise SaslFailed("The SCRAM server signature does not match: the server does not know "
                             "this user's credentials")
