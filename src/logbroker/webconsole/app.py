"""The console's web application: Starlette routes that render Jinja2 pages, with htmx for the
parts that reload on their own (topic search, the message browser, the produce form) and uPlot
charts fed by small JSON endpoints.

Every handler runs its Kafka requests (`cluster.Cluster`, blocking) in a worker thread, and
turns a ConsoleError into a message on the page. Writes are plain form POSTs answered by a
redirect (POST/redirect/GET), so each works without JavaScript; the guard middleware decides
whether a write is allowed at all.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from urllib.parse import quote, urlencode

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from logbroker.webconsole import paging, render
from logbroker.webconsole import schemas as schema_view
from logbroker.webconsole.cluster import Cluster, ConsoleError, NotFoundError
from logbroker.webconsole.guard import Credentials, GuardMiddleware
from logbroker.webconsole.model import Acl
from logbroker.webconsole.sampler import Sampler
from logbroker.webconsole.schemas import SchemaBrowser

HERE = Path(__file__).parent
TOPICS_PER_PAGE = 50
GROUPS_PER_PAGE = 50
LIMITS = (10, 20, 50, 100, 200, 500)


def create_app(cluster: Cluster, *, read_only: bool = False,
               credentials: Credentials | None = None, sample_interval_s: float = 5.0,
               schemas: SchemaBrowser | None = None) -> Starlette:
    """`schemas`: the schema registry of the Schemas page and of decoding framed values."""
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    env = templates.env
    env.globals.update(read_only=read_only, bootstrap=cluster.bootstrap,
                       registry_url=schemas.url if schemas else None)
    env.filters.update(count=render.human_count, rate=render.human_rate,
                       ts=render.format_timestamp, bytes=render.human_bytes,
                       q=lambda s: quote(str(s), safe=""))
    sampler = Sampler(cluster, interval_s=sample_interval_s)

    @contextlib.asynccontextmanager
    async def lifespan(app):
        sampler.start()
        try:
            yield
        finally:
            await run_in_threadpool(sampler.stop)

    def page(request: Request, name: str, status_code: int = 200, **context) -> Response:
        context.setdefault("notice", request.query_params.get("notice"))
        context.setdefault("error", request.query_params.get("error"))
        return templates.TemplateResponse(request, name, context, status_code=status_code)

    def back(path: str, **params) -> RedirectResponse:
        query = urlencode({k: v for k, v in params.items() if v is not None})
        return RedirectResponse(f"{path}?{query}" if query else path, status_code=303)

    async def call(fn, *args, **kwargs):
        return await run_in_threadpool(fn, *args, **kwargs)

    # -- overview ----------------------------------------------------------------------------

    async def overview(request: Request) -> Response:
        try:
            health = await call(cluster.health)
        except ConsoleError as e:
            return page(request, "error.html", 502, error=str(e), title="Overview")
        return page(request, "overview.html", health=health, title="Overview",
                    sampler_error=sampler.last_error, interval_s=sampler.interval_s)

    async def rates_json(request: Request) -> Response:
        topic = request.query_params.get("topic")
        series = sampler.rate_series(topic)
        return JSONResponse({"t": [t for t, _ in series],
                             "series": [{"label": f"{topic or 'all topics'} records/s",
                                         "values": [round(v, 2) for _, v in series]}]})

    # -- topics ------------------------------------------------------------------------------

    async def topics(request: Request) -> Response:
        query = request.query_params.get("q", "").strip()
        internal = request.query_params.get("internal") == "1"
        number = _int(request.query_params.get("page"), 1, minimum=1)
        try:
            metadata = await call(cluster.metadata)
            names = [n for n in sorted(metadata.topics)
                     if (internal or not n.startswith("__")) and query.lower() in n.lower()]
            pages = max(1, -(-len(names) // TOPICS_PER_PAGE))
            number = min(number, pages)
            shown = names[(number - 1) * TOPICS_PER_PAGE:number * TOPICS_PER_PAGE]
            infos = await call(cluster.topics, shown, metadata=metadata)
        except ConsoleError as e:
            return page(request, "error.html", 502, error=str(e), title="Topics")
        return page(request, "topics.html", title="Topics", topics=infos, query=query,
                    internal=internal, page_number=number, pages=pages, total=len(names),
                    first=(number - 1) * TOPICS_PER_PAGE + 1, rates=sampler.topic_rates())

    async def create_topic(request: Request) -> Response:
        form = await request.form()
        name = str(form.get("name", "")).strip()
        try:
            if not name:
                raise ConsoleError("Enter a topic name.")
            partitions = _int(form.get("partitions"), 1, minimum=1)
            replication = _int(form.get("replication_factor"), 1, minimum=1)
            config = _properties(str(form.get("configs", "")))
            await call(cluster.create_topic, name, partitions=partitions,
                       replication_factor=replication, config=config)
        except ConsoleError as e:
            return back("/topics", error=str(e))
        return back(f"/topics/{quote(name, safe='')}",
                    notice=f"Created topic '{name}' with {partitions} partition(s).")

    async def topic(request: Request) -> Response:
        name = request.path_params["name"]
        tab = request.query_params.get("tab", "messages")
        try:
            info = await call(cluster.topic, name, sizes=tab == "partitions")
            configs = await call(cluster.configs, name) if tab == "configs" else []
            configs.sort(key=lambda c: (c.is_default, c.name))  # the topic's overrides first
            consumers = await call(cluster.groups_of_topic, name) if tab == "consumers" else []
        except ConsoleError as e:
            status = 404 if isinstance(e, NotFoundError) else 502
            return page(request, "error.html", status, error=str(e), title=name)
        return page(request, "topic.html", title=name, topic=info, tab=tab, configs=configs,
                    consumers=consumers,
                    limits=LIMITS, formats=render.FORMATS, params=request.query_params,
                    rate=sampler.topic_rates().get(name))

    async def messages(request: Request) -> Response:
        name = request.path_params["name"]
        params = request.query_params
        limit = min(_int(params.get("limit"), 20, minimum=1), max(LIMITS))
        fmt = params.get("format", "auto")
        start = params.get("start", "newest")
        needle = params.get("filter", "").strip()
        try:
            info = await call(cluster.topic, name)
            all_ids = [p.partition for p in info.partitions]
            chosen = params.get("partition", "all")
            partitions = all_ids if chosen in ("", "all") else [_int(chosen, 0)]
            if not set(partitions) <= set(all_ids):
                raise ConsoleError(f"Topic '{name}' has no partition {chosen}.")
            timestamp_ms = None
            if start == "timestamp":
                try:
                    timestamp_ms = render.parse_datetime(params.get("timestamp", ""))
                except ValueError as e:
                    raise ConsoleError(str(e)) from None
            cursor = None
            if params.get("cursor"):
                try:
                    cursor = paging.parse_cursor(params["cursor"])
                except ValueError as e:
                    raise ConsoleError(str(e)) from None
            if start not in paging.STARTS:
                raise ConsoleError(f"Unknown start '{start}': one of {', '.join(paging.STARTS)}.")
            found = await call(cluster.read_messages, name, partitions=partitions, start=start,
                               limit=limit, offset=_int(params.get("offset"), 0),
                               timestamp_ms=timestamp_ms, cursor=cursor,
                               matches=(lambda m: render.matches(m, needle)) if needle else None)
        except ConsoleError as e:
            return page(request, "messages.html", error=str(e), rows=[], found=None)
        def show_value(data: bytes | None) -> render.Shown:
            decoded = schemas.decode(data) if schemas and fmt in ("auto", "json") else None
            return decoded or render.show(data, fmt)

        rows = await call(lambda: [(m, render.show(m.key, fmt), show_value(m.value),
                                    [(h, render.show(v, "auto")) for h, v in m.headers])
                                   for m in found.messages])
        here = f"/topics/{quote(name, safe='')}/messages?"
        query = [(k, v) for k, v in params.multi_items() if k != "cursor"]
        next_url = None
        if found.next_cursor is not None:
            next_url = here + urlencode(
                [*query, ("cursor", paging.format_cursor(found.next_cursor))])
        return page(request, "messages.html", rows=rows, found=found, needle=needle,
                    limit=limit, next_url=next_url, newest=start == "newest",
                    first_url=here + urlencode(query) if cursor is not None else None)

    async def produce(request: Request) -> Response:
        name = request.path_params["name"]
        form = await request.form()
        try:
            headers = [(k, v.encode()) for k, v in
                       _properties(str(form.get("headers", ""))).items()]
            partition = form.get("partition", "")
            key = str(form.get("key", ""))
            value = str(form.get("value", ""))
            where = await call(cluster.produce, name, value=value.encode(),
                               key=key.encode() if key else None, headers=headers,
                               partition=None if partition in ("", "any") else _int(partition, 0))
        except ConsoleError as e:
            return page(request, "produced.html", error=str(e))  # 200: htmx swaps it in
        response = page(request, "produced.html", where=where)
        response.headers["HX-Trigger"] = "produced"
        return response

    async def save_configs(request: Request) -> Response:
        name = request.path_params["name"]
        form = await request.form()
        try:
            current = {c.name: c for c in await call(cluster.configs, name)}
            changes = {}
            for key, value in form.multi_items():
                if key.startswith("config.") and key[7:] in current:
                    config = current[key[7:]]
                    if not config.read_only and str(value) != (config.value or ""):
                        changes[config.name] = str(value)
            added = _properties(str(form.get("add", "")))
            changes.update(added)
            resets = [str(v) for k, v in form.multi_items() if k == "reset"]
            if not changes and not resets:
                raise ConsoleError("Nothing changed.")
            await call(cluster.alter_configs, name, set_=changes, delete=resets)
        except ConsoleError as e:
            return back(f"/topics/{name}", tab="configs", error=str(e))
        what = ", ".join([f"{k}={v}" for k, v in changes.items()] + [f"{k} reset" for k in resets])
        return back(f"/topics/{name}", tab="configs", notice=f"Updated {what}.")

    async def delete_topic(request: Request) -> Response:
        name = request.path_params["name"]
        form = await request.form()
        if form.get("confirm") != name:
            return back(f"/topics/{name}", tab="partitions",
                        error=f"Type the topic name '{name}' to confirm its deletion.")
        try:
            await call(cluster.delete_topic, name)
        except ConsoleError as e:
            return back(f"/topics/{name}", tab="partitions", error=str(e))
        return back("/topics", notice=f"Deleted topic '{name}'.")

    # -- consumer groups ---------------------------------------------------------------------

    async def groups(request: Request) -> Response:
        query = request.query_params.get("q", "").strip()
        number = _int(request.query_params.get("page"), 1, minimum=1)
        try:
            listed = [g for g in await call(cluster.groups)
                      if query.lower() in g.group_id.lower()]
            pages = max(1, -(-len(listed) // GROUPS_PER_PAGE))
            number = min(number, pages)
            shown = listed[(number - 1) * GROUPS_PER_PAGE:number * GROUPS_PER_PAGE]
            detail = await call(cluster.groups_detail, [g.group_id for g in shown])
            details = [detail[g.group_id] for g in shown]
        except ConsoleError as e:
            return page(request, "error.html", 502, error=str(e), title="Consumer groups")
        return page(request, "groups.html", title="Consumer groups", query=query,
                    groups=list(zip(shown, details)), page_number=number, pages=pages,
                    total=len(listed))

    async def group(request: Request) -> Response:
        group_id = request.query_params.get("id", "")
        try:
            info = await call(cluster.group, group_id)
        except ConsoleError as e:
            return page(request, "error.html", 502, error=str(e), title=group_id)
        if info is None:
            return page(request, "error.html", 404, title=group_id,
                        error=f"Group '{group_id}' does not exist (GROUP_ID_NOT_FOUND).")
        sampler.watch_group(group_id, info.total_lag)
        topics = sorted({o.topic for o in info.offsets})
        return page(request, "group.html", title=group_id, group=info, topics=topics,
                    interval_s=sampler.interval_s)

    async def lag_json(request: Request) -> Response:
        group_id = request.query_params.get("id", "")
        sampler.watch_group(group_id)
        series = sampler.lag_series(group_id)
        return JSONResponse({"t": [t for t, _ in series],
                             "series": [{"label": "total lag", "values": [v for _, v in series]}]})

    async def reset_group(request: Request) -> Response:
        form = await request.form()
        group_id = str(form.get("id", ""))
        to = str(form.get("to", "earliest"))
        topic_name = str(form.get("topic", "")) or None
        try:
            timestamp_ms = None
            if to == "timestamp":
                try:
                    timestamp_ms = render.parse_datetime(str(form.get("timestamp", "")))
                except ValueError as e:
                    raise ConsoleError(str(e)) from None
            elif to not in ("earliest", "latest"):
                raise ConsoleError(f"Unknown reset target '{to}'.")
            targets = await call(cluster.reset_group, group_id, to=to, topic=topic_name,
                                 timestamp_ms=timestamp_ms)
        except ConsoleError as e:
            return back("/group", id=group_id, error=str(e))
        return back("/group", id=group_id,
                    notice=f"Reset {len(targets)} partition(s) of group '{group_id}' to {to}.")

    async def delete_group(request: Request) -> Response:
        form = await request.form()
        group_id = str(form.get("id", ""))
        if form.get("confirm") != group_id:
            return back("/group", id=group_id,
                        error=f"Type the group id '{group_id}' to confirm its deletion.")
        try:
            await call(cluster.delete_group, group_id)
        except ConsoleError as e:
            return back("/group", id=group_id, error=str(e))
        return back("/groups", notice=f"Deleted group '{group_id}'.")

    # -- security ----------------------------------------------------------------------------

    async def security(request: Request) -> Response:
        # Each part on its own: a principal may be allowed to list one and not the other.
        try:
            acls, acls_error = await call(cluster.acls), None
        except ConsoleError as e:
            acls, acls_error = [], str(e)
        try:
            users, users_error = await call(cluster.scram_users), None
        except ConsoleError as e:
            users, users_error = [], str(e)
        return page(request, "security.html", title="Security", acls=acls, users=users,
                    acls_error=acls_error, users_error=users_error)

    async def change_acl(request: Request) -> Response:
        """POST /security/acls adds the ACL the form describes, …/acls/delete removes it."""
        form = await request.form()
        remove = request.url.path.endswith("/delete")
        try:
            acl = _acl(form)
            await call(cluster.delete_acl if remove else cluster.create_acl, acl)
        except ConsoleError as e:
            return back("/security", error=str(e))
        return back("/security", notice=f"{'Removed' if remove else 'Added'} {acl.permission} "
                                        f"{acl.operation} for {acl.principal} on "
                                        f"{acl.resource_type} '{acl.resource_name}'.")

    async def add_user(request: Request) -> Response:
        form = await request.form()
        name = str(form.get("name", "")).strip()
        mechanism = str(form.get("mechanism", "SCRAM-SHA-256"))
        try:
            if not name or not form.get("password"):
                raise ConsoleError("Enter a user name and a password.")
            await call(cluster.upsert_scram_user, name, mechanism=mechanism,
                       password=str(form.get("password")),
                       iterations=_int(form.get("iterations"), 8192, minimum=4096))
        except ConsoleError as e:
            return back("/security", error=str(e))
        return back("/security", notice=f"Set the {mechanism} credential of '{name}'.")

    async def remove_user(request: Request) -> Response:
        form = await request.form()
        name = str(form.get("name", ""))
        mechanism = str(form.get("mechanism", ""))
        try:
            await call(cluster.delete_scram_user, name, mechanism=mechanism)
        except ConsoleError as e:
            return back("/security", error=str(e))
        return back("/security", notice=f"Removed the {mechanism} credential of '{name}'.")

    # -- schemas -----------------------------------------------------------------------------

    async def schema_subjects(request: Request) -> Response:
        if schemas is None:
            return page(request, "schemas.html", title="Schemas", subjects=None)
        try:
            subjects = await call(schemas.subjects)
            level = await call(schemas.global_compatibility)
        except ConsoleError as e:
            return page(request, "error.html", 502, error=str(e), title="Schemas")
        return page(request, "schemas.html", title="Schemas", subjects=subjects, level=level)

    async def schema_subject(request: Request) -> Response:
        name = request.query_params.get("name", "")
        if schemas is None:
            return back("/schemas")
        try:
            versions = await call(schemas.versions, name)
            level, own = await call(schemas.compatibility, name)
            right = _int(request.query_params.get("right"), versions[-1])
            left = _int(request.query_params.get("left"), versions[-2] if len(versions) > 1
                        else right)
            for chosen in (left, right):
                if chosen not in versions:
                    raise NotFoundError(f"Subject '{name}' has no version {chosen}.")
            shown = {v: await call(schemas.version, name, v) for v in {left, right}}
        except ConsoleError as e:
            status = 404 if isinstance(e, NotFoundError) else 502
            return page(request, "error.html", status, error=str(e), title=name)
        diff = schema_view.side_by_side(schema_view.pretty(shown[left].schema),
                                        schema_view.pretty(shown[right].schema))
        return page(request, "subject.html", title=name, subject=name, versions=versions,
                    level=level, own_level=own, left=shown[left], right=shown[right], diff=diff,
                    changed=sum(row.tag != "equal" for row in diff))

    async def favicon(request: Request) -> Response:
        return RedirectResponse("/static/favicon.svg", status_code=301)

    routes = [
        Route("/", overview),
        Route("/api/rates.json", rates_json),
        Route("/topics", topics),
        Route("/topics", create_topic, methods=["POST"]),
        Route("/topics/{name}", topic),
        Route("/topics/{name}/messages", messages),
        Route("/topics/{name}/produce", produce, methods=["POST"]),
        Route("/topics/{name}/configs", save_configs, methods=["POST"]),
        Route("/topics/{name}/delete", delete_topic, methods=["POST"]),
        Route("/groups", groups),
        Route("/group", group),
        Route("/group/lag.json", lag_json),
        Route("/group/reset", reset_group, methods=["POST"]),
        Route("/group/delete", delete_group, methods=["POST"]),
        Route("/security", security),
        Route("/security/acls", change_acl, methods=["POST"]),
        Route("/security/acls/delete", change_acl, methods=["POST"]),
        Route("/security/users", add_user, methods=["POST"]),
        Route("/security/users/delete", remove_user, methods=["POST"]),
        Route("/schemas", schema_subjects),
        Route("/schemas/subject", schema_subject),
        Route("/favicon.ico", favicon),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    middleware = [Middleware(GuardMiddleware, credentials=credentials, read_only=read_only)]
    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
    app.state.sampler = sampler
    return app


def _int(value, default: int, *, minimum: int | None = None) -> int:
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        return default
    return number if minimum is None else max(minimum, number)


def _properties(text: str) -> dict[str, str]:
    try:
        return render.parse_properties(text)
    except ValueError as e:
        raise ConsoleError(str(e)) from None


def _acl(form) -> Acl:
    fields = {k: str(form.get(k, "")).strip() for k in
              ("resource_type", "resource_name", "pattern_type", "principal", "host",
               "operation", "permission")}
    if not fields["principal"] or not fields["resource_name"]:
        raise ConsoleError("Enter a principal (e.g. User:alice) and a resource name.")
    fields["host"] = fields["host"] or "*"
    return Acl(**fields)

