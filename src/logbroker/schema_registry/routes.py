"""The REST API's paths, matched as JAX-RS matches them in Confluent's registry: segment by segment on
the raw (still percent-encoded) path, each segment decoded after the split — so a subject `a/b`
sent as `a%2Fb` stays one subject. Pure functions, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote


@dataclass(frozen=True, slots=True)
class Route:
    """`name` labels the endpoint in metrics and dispatch; `write` routes go to the leader;
    `super_user` routes need a super user when authentication is on."""

    method: str
    pattern: tuple[str, ...]
    name: str
    write: bool = False
    super_user: bool = False


def _r(method: str, path: str, name: str, *, write: bool = False, super_user: bool = False) -> Route:
    return Route(method, tuple(path.strip("/").split("/")) if path != "/" else (), name, write, super_user)


ROUTES = (
    _r("GET", "/", "root"),
    _r("GET", "/subjects", "list_subjects"),
    _r("POST", "/subjects/{subject}", "lookup_schema"),
    _r("DELETE", "/subjects/{subject}", "delete_subject", write=True, super_user=True),
    _r("GET", "/subjects/{subject}/versions", "list_versions"),
    _r("POST", "/subjects/{subject}/versions", "register_schema", write=True),
    _r("GET", "/subjects/{subject}/versions/{version}", "get_version"),
    _r("DELETE", "/subjects/{subject}/versions/{version}", "delete_version", write=True, super_user=True),
    _r("GET", "/subjects/{subject}/versions/{version}/schema", "get_version_schema"),
    _r("GET", "/subjects/{subject}/versions/{version}/referencedby", "get_referenced_by"),
    _r("GET", "/schemas/types", "get_schema_types"),
    _r("GET", "/schemas/ids/{id}", "get_schema_by_id"),
    _r("GET", "/schemas/ids/{id}/schema", "get_schema_text_by_id"),
    _r("GET", "/schemas/ids/{id}/versions", "get_id_versions"),
    _r("GET", "/schemas/ids/{id}/subjects", "get_id_subjects"),
    _r("GET", "/config", "get_global_config"),
    _r("PUT", "/config", "set_global_config", write=True, super_user=True),
    _r("DELETE", "/config", "delete_global_config", write=True, super_user=True),
    _r("GET", "/config/{subject}", "get_subject_config"),
    _r("PUT", "/config/{subject}", "set_subject_config", write=True, super_user=True),
    _r("DELETE", "/config/{subject}", "delete_subject_config", write=True, super_user=True),
    _r("GET", "/mode", "get_global_mode"),
    _r("PUT", "/mode", "set_global_mode", write=True, super_user=True),
    _r("GET", "/mode/{subject}", "get_subject_mode"),
    _r("PUT", "/mode/{subject}", "set_subject_mode", write=True, super_user=True),
    _r("DELETE", "/mode/{subject}", "delete_subject_mode", write=True, super_user=True),
    _r("POST", "/compatibility/subjects/{subject}/versions/{version}", "test_compatibility"),
    _r("POST", "/compatibility/subjects/{subject}/versions", "test_compatibility_all"),
)
ENDPOINTS = tuple(dict.fromkeys(r.name for r in ROUTES))


class NoRoute(Exception):
    """404 when no path matches; 405 (`method_allowed` False) when the path matches another method."""

    def __init__(self, *, path_matched: bool) -> None:
        super().__init__()
        self.path_matched = path_matched


def split_path(raw_path: bytes) -> tuple[str, ...]:
    text = raw_path.decode("latin-1")
    segments = text.strip("/").split("/") if text.strip("/") else []
    return tuple(unquote(s, errors="strict") for s in segments)


def match(method: str, segments: tuple[str, ...]) -> tuple[Route, dict[str, str]]:
    """The route for `method` and the path `segments`, with its parameters; raises NoRoute."""
    path_matched = False
    for route in ROUTES:
        if len(route.pattern) != len(segments):
            continue
        params = {}
        for expected, actual in zip(route.pattern, segments):
            if expected.startswith("{"):
                if not actual:
                    break
                params[expected[1:-1]] = actual
            elif expected != actual:
                break
        else:
            if route.method == method:
                return route, params
            path_matched = True
    raise NoRoute(path_matched=path_matched)
