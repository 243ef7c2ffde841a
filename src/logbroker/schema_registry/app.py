"""The registry's ASGI app: Confluent Schema Registry's REST API over a SchemaRegistry.

Each request: route (routes.py) → Basic authentication when the broker has SASL users (401), a
super user for config/mode changes and deletes (403) → writes on a broker that does not lead
`_schemas` are forwarded to the one that does (forwarding.py) → the SchemaRegistry call → JSON
with Content-Type application/vnd.schemaregistry.v1+json. Every RegistryError becomes Confluent's
`{"error_code": …, "message": …}` here and only here; anything else is a 500 with error_code 50001
and one log line. Request bodies are JSON of at most MAX_BODY_BYTES.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from logbroker.schema_registry import errors
from logbroker.schema_registry.auth import BasicAuthenticator, require_super_user
from logbroker.schema_registry.kafka_store import NotLeader
from logbroker.schema_registry.routes import NoRoute, Route, match, split_path
from logbroker.schema_registry.service import SchemaRegistry, schema_json

log = logging.getLogger("io.confluent.kafka.schemaregistry.rest.SchemaRegistryRestApplication")

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
ACCEPTED_CONTENT_TYPES = ("application/vnd.schemaregistry.v1+json", "application/vnd.schemaregistry+json",
                          "application/json", "application/octet-stream")
MAX_BODY_BYTES = 16 * 1024 * 1024
FORWARDED_HEADER = "x-logbroker-forwarded"
SCHEMA_TYPES_ANSWER = ["JSON", "PROTOBUF", "AVRO"]


def _json_response(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode(), status,
                    media_type=CONTENT_TYPE)


def error_response(exc: errors.RegistryError) -> Response:
    response = _json_response({"error_code": exc.error_code, "message": exc.message}, exc.status)
    if exc.status == 401:
        response.headers["WWW-Authenticate"] = 'Basic realm="SchemaRegistry"'
    return response


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").lower() == "true"


def _schema_id(params: dict[str, str]) -> int:
    try:
        return int(params["id"])
    except ValueError:
        raise errors.HttpError(404) from None


class RegistryApp:
    """`forwarder` sends a write to the leader (None on a single node: this broker leads);
    `metrics` counts requests (None: not counted)."""

    def __init__(self, registry: SchemaRegistry, *, authenticator: BasicAuthenticator | None,
                 forwarder=None, metrics=None) -> None:
        self.registry = registry
        self.authenticator = authenticator
        self.forwarder = forwarder
        self.metrics = metrics

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        started = time.perf_counter()
        route_name = "unknown"
        try:
            route, params = match(request.method, split_path(scope.get("raw_path") or scope["path"].encode()))
            route_name = route.name
            response = await self._handle(request, route, params)
        except NoRoute as exc:
            response = error_response(errors.HttpError(405 if exc.path_matched else 404))
        except UnicodeDecodeError:
            response = error_response(errors.HttpError(404))
        except errors.RegistryError as exc:
            response = error_response(exc)
        except Exception:  # noqa: BLE001 - a bug must not take the connection down without an answer
            log.exception("Error handling %s %s", request.method, request.url.path)
            response = _json_response({"error_code": 50001, "message": "Internal Server Error"}, 500)
        if self.metrics is not None:
            self.metrics.observe(route_name, request.method, response.status_code, time.perf_counter() - started)
        await response(scope, receive, send)

    async def _handle(self, request: Request, route: Route, params: dict[str, str]) -> Response:
        user = None
        if self.authenticator is not None:
            user = await asyncio.get_running_loop().run_in_executor(
                None, self.authenticator.authenticate, request.headers.get("authorization"))
            if route.super_user:
                require_super_user(user, f"{request.method} {request.url.path}")
        body = await self._body(request) if request.method in ("POST", "PUT") else None
        if route.write and self.forwarder is not None and not self.registry.store.is_leader():
            return await self._forward(request, body)
        try:
            answer = await getattr(self, "_" + route.name)(request, params, body)
        except NotLeader:
            if self.forwarder is None:
                raise errors.UnknownLeader("This broker does not lead the _schemas topic") from None
            return await self._forward(request, body)
        return answer if isinstance(answer, Response) else _json_response(answer)

    async def _forward(self, request: Request, body) -> Response:
        if request.headers.get(FORWARDED_HEADER):
            raise errors.UnknownLeader("The request was forwarded to a broker that does not lead _schemas")
        status, content = await self.forwarder.forward(
            request.method, request.scope.get("raw_path", b"").decode("latin-1")
            + (f"?{request.url.query}" if request.url.query else ""),
            None if body is None else json.dumps(body).encode(), request.headers.get("authorization"))
        return Response(content, status, media_type=CONTENT_TYPE)

    @staticmethod
    async def _body(request: Request):
        content_type = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
        if content_type not in ACCEPTED_CONTENT_TYPES:
            raise errors.HttpError(415)
        data = bytearray()
        async for chunk in request.stream():
            data += chunk
            if len(data) > MAX_BODY_BYTES:
                raise errors.SchemaTooLarge(f"The request body is larger than {MAX_BODY_BYTES} bytes")
        try:
            body = json.loads(data) if data else {}
        except ValueError as exc:
            raise errors.BadRequest(f"Unrecognized JSON body: {exc}") from None
        if not isinstance(body, dict):
            raise errors.UnprocessableBody("The request body must be a JSON object")
        return body

    # -- endpoints (named after routes.ROUTES) ----------------------------------------------------
    async def _root(self, request, params, body):
        return {}

    async def _list_subjects(self, request, params, body):
        return self.registry.subjects(deleted=_flag(request, "deleted"),
                                      prefix=request.query_params.get("subjectPrefix", ""))

    async def _lookup_schema(self, request, params, body):
        return self.registry.lookup(params["subject"], body, normalize=_flag(request, "normalize"),
                                    deleted=_flag(request, "deleted"))

    async def _delete_subject(self, request, params, body):
        return await self.registry.delete_subject(params["subject"], permanent=_flag(request, "permanent"))

    async def _list_versions(self, request, params, body):
        return self.registry.versions(params["subject"], deleted=_flag(request, "deleted"))

    async def _register_schema(self, request, params, body):
        return await self.registry.register(params["subject"], body, normalize=_flag(request, "normalize"))

    async def _get_version(self, request, params, body):
        return schema_json(self.registry.version(params["subject"], params["version"],
                                                 deleted=_flag(request, "deleted")))

    async def _delete_version(self, request, params, body):
        return await self.registry.delete_version(params["subject"], params["version"],
                                                  permanent=_flag(request, "permanent"))

    async def _get_version_schema(self, request, params, body):
        schema = self.registry.version(params["subject"], params["version"], deleted=_flag(request, "deleted"))
        return Response(schema.schema.encode(), 200, media_type=CONTENT_TYPE)

    async def _get_referenced_by(self, request, params, body):
        return self.registry.referenced_by(params["subject"], params["version"])

    async def _get_schema_types(self, request, params, body):
        return SCHEMA_TYPES_ANSWER

    async def _get_schema_by_id(self, request, params, body):
        return self.registry.schema_by_id(_schema_id(params), request.query_params.get("format", ""))

    async def _get_schema_text_by_id(self, request, params, body):
        answer = self.registry.schema_by_id(_schema_id(params), request.query_params.get("format", ""))
        return Response(answer["schema"].encode(), 200, media_type=CONTENT_TYPE)

    async def _get_id_versions(self, request, params, body):
        return self.registry.id_versions(_schema_id(params), deleted=_flag(request, "deleted"))

    async def _get_id_subjects(self, request, params, body):
        return self.registry.id_subjects(_schema_id(params), deleted=_flag(request, "deleted"))

    async def _get_global_config(self, request, params, body):
        return self.registry.config(None)

    async def _set_global_config(self, request, params, body):
        return await self.registry.set_config(None, body)

    async def _delete_global_config(self, request, params, body):
        return await self.registry.delete_config(None)

    async def _get_subject_config(self, request, params, body):
        return self.registry.config(params["subject"], default_to_global=_flag(request, "defaultToGlobal"))

    async def _set_subject_config(self, request, params, body):
        return await self.registry.set_config(params["subject"], body)

    async def _delete_subject_config(self, request, params, body):
        return await self.registry.delete_config(params["subject"])

    async def _get_global_mode(self, request, params, body):
        return self.registry.mode(None)

    async def _set_global_mode(self, request, params, body):
        return await self.registry.set_mode(None, body, force=_flag(request, "force"))

    async def _get_subject_mode(self, request, params, body):
        return self.registry.mode(params["subject"], default_to_global=_flag(request, "defaultToGlobal"))

    async def _set_subject_mode(self, request, params, body):
        return await self.registry.set_mode(params["subject"], body, force=_flag(request, "force"))

    async def _delete_subject_mode(self, request, params, body):
        return await self.registry.delete_mode(params["subject"])

    async def _test_compatibility(self, request, params, body):
        return self.registry.test_compatibility(params["subject"], params["version"], body,
                                                normalize=_flag(request, "normalize"),
                                                verbose=_flag(request, "verbose"))

    async def _test_compatibility_all(self, request, params, body):
        return self.registry.test_compatibility(params["subject"], None, body,
                                                normalize=_flag(request, "normalize"),
                                                verbose=_flag(request, "verbose"))
