"""Kafka principal names: `User:ANONYMOUS`, `User:<sasl user>`, and for a TLS client
certificate `User:` + its subject in RFC 2253 form (Java's X500Principal.getName()), which lists
the RDNs most specific first: `User:CN=alice,OU=eng,O=Example,C=GB`.
"""

from __future__ import annotations

ANONYMOUS = "User:ANONYMOUS"

# Attribute names Java's RFC 2253 form uses by keyword; others appear as their OID.
_KEYWORDS = {"commonName": "CN", "countryName": "C", "localityName": "L",
             "stateOrProvinceName": "ST", "organizationName": "O", "organizationalUnitName": "OU",
             "streetAddress": "STREET", "domainComponent": "DC", "userId": "UID"}
_OIDS = {"emailAddress": "1.2.840.113549.1.9.1", "serialNumber": "2.5.4.5", "title": "2.5.4.12",
         "givenName": "2.5.4.42", "surname": "2.5.4.4"}


def _escape(value: str) -> str:
    out = []
    for i, ch in enumerate(value):
        if ch in ',+"\\<>;' or (ch == "#" and i == 0) or (ch == " " and i in (0, len(value) - 1)):
            out.append("\\")
        out.append(ch)
    return "".join(out)


def rfc2253_name(subject: tuple) -> str:
    """A subject as `ssl.SSLSocket.getpeercert()` gives it → its RFC 2253 string."""
    rdns = []
    for rdn in reversed(subject):
        rdns.append("+".join(f"{_KEYWORDS.get(k) or _OIDS.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(rdns)


def ssl_principal(subject: tuple | None) -> str:
    return f"User:{rfc2253_name(subject)}" if subject else ANONYMOUS
