"""The typed-column options, parsed once into frozen values (pure: no network, no pyspark).

Names follow Confluent's serializers and Spark's `from_avro`:

    valueFormat / keyFormat            avro | protobuf | json (unset: the column stays binary)
    schema.registry.url                the registry, e.g. http://localhost:8081
    schema.registry.basic.auth.user.info   user:password for HTTP Basic authentication
    valueSubject / keySubject          default "<topic>-value" / "<topic>-key" (TopicNameStrategy)
    valueSchemaVersion / keySchemaVersion  reader (or writer) schema version; default latest
    valueMessageName / keyMessageName  Protobuf: the message type read or written (default the
                                       schema's first; a derived schema's message name)
    valueSchemaAutoRegister / keySchemaAutoRegister  writes: register a schema derived from the
                                       DataFrame's column type instead of using the latest
    mode                               reads: PERMISSIVE (bad record: null column) | FAILFAST
                                       (writes always fail on a row that does not fit)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from logbroker.spark.errors import OptionError

FORMATS = ("avro", "protobuf", "json")
SCHEMA_TYPES = {"avro": "AVRO", "protobuf": "PROTOBUF", "json": "JSON"}
MODES = ("PERMISSIVE", "FAILFAST")


@dataclass(frozen=True, kw_only=True)
class ColumnFormat:
    """How one column (`key` or `value`) is framed and which subject holds its schemas."""

    column: str
    format: str
    subject: str
    version: int | None = None  # None: the subject's latest
    message_name: str | None = None
    auto_register: bool = False
    # Writes: the id of the schema the column is encoded with, settled on the driver.
    schema_id: int | None = None

    @property
    def schema_type(self) -> str:
        return SCHEMA_TYPES[self.format]


@dataclass(frozen=True, kw_only=True)
class TypedOptions:
    """The registry to ask and the typed columns; `columns` is never empty."""

    registry_url: str
    basic_auth_user_info: str | None
    columns: tuple[ColumnFormat, ...]
    failfast: bool = False

    def registry_config(self) -> dict[str, str]:
        """The configuration of confluent-kafka's SchemaRegistryClient."""
        config = {"url": self.registry_url}
        if self.basic_auth_user_info:
            config["basic.auth.user.info"] = self.basic_auth_user_info
        return config

    def column(self, name: str) -> ColumnFormat | None:
        return next((c for c in self.columns if c.column == name), None)


def parse_typed_options(opts: Mapping[str, str], *, topic: str | None) -> TypedOptions | None:
    """`opts` has lower-cased names. None when neither keyFormat nor valueFormat is set.
    `topic` is the one topic a default subject is named after (None: several or unknown)."""
    columns = tuple(c for c in (_column(opts, "key", topic), _column(opts, "value", topic)) if c)
    if not columns:
        return None
    url = opts.get("schema.registry.url", "").strip()
    if not url:
        raise OptionError("option 'schema.registry.url' must be set with keyFormat/valueFormat, "
                          "e.g. .option('schema.registry.url', 'http://localhost:8081')")
    mode = opts.get("mode", "PERMISSIVE").strip().upper()
    if mode not in MODES:
        raise OptionError(f"option 'mode' must be PERMISSIVE or FAILFAST, got {opts['mode']!r}")
    return TypedOptions(registry_url=url,
                        basic_auth_user_info=opts.get("schema.registry.basic.auth.user.info"),
                        columns=columns, failfast=mode == "FAILFAST")


def _column(opts: Mapping[str, str], column: str, topic: str | None) -> ColumnFormat | None:
    raw = opts.get(f"{column}format", "").strip().lower()
    if not raw:
        return None
    if raw not in FORMATS:
        raise OptionError(f"option '{column}Format' must be avro, protobuf or json, got {raw!r}")
    subject = opts.get(f"{column}subject", "").strip()
    if not subject:
        if topic is None:
            raise OptionError(f"option '{column}Subject' must be set when the query does not "
                              f"name exactly one topic (the default is '<topic>-{column}')")
        subject = f"{topic}-{column}"
    version = None
    raw_version = opts.get(f"{column}schemaversion", "latest").strip().lower()
    if raw_version != "latest":
        try:
            version = int(raw_version)
        except ValueError:
            raise OptionError(f"option '{column}SchemaVersion' must be a version number or "
                              f"latest, got {raw_version!r}") from None
    auto = opts.get(f"{column}schemaautoregister", "false").strip().lower()
    if auto not in ("true", "false"):
        raise OptionError(f"option '{column}SchemaAutoRegister' must be true or false, got {auto!r}")
    return ColumnFormat(column=column, format=raw, subject=subject, version=version,
                        message_name=opts.get(f"{column}messagename", "").strip() or None,
                        auto_register=auto == "true")
