"""Build a kio response of any version from plain Python data.

kio generates one frozen dataclass per message and version, nested ones included, so a handler
that answers several versions would otherwise repeat itself per version. `build(cls, data)` walks
the dataclass fields of `cls`: a field present in `data` is converted to the field's type (nested
dicts become that version's nested classes, ints in ms become timedeltas, 16 bytes become UUIDs);
a field absent from `data` takes its default — so one dict answers every version, and fields a
version lacks are simply dropped.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import uuid
from typing import Any

from kio.serial._implicit_defaults import get_implicit_default
from kio.serial._introspect import EntityField, EntityTupleField, PrimitiveField, PrimitiveTupleField, classify_field
from kio.schema.errors import ErrorCode
from kio.serial.readers import tz_aware_from_i64
from kio.static.primitive import TZAware, i32Timedelta, i64Timedelta, i64


@functools.cache
def _plan(cls: type) -> tuple:
    plan = []
    for f in dataclasses.fields(cls):
        kind = classify_field(f)
        plan.append((f.name, kind, f))
    return tuple(plan)


def build(cls: type, data: dict[str, Any]) -> Any:
    kwargs = {}
    for name, kind, f in _plan(cls):
        if name in data:
            kwargs[name] = _convert(kind, data[name])
        elif f.default is not dataclasses.MISSING:
            kwargs[name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            kwargs[name] = f.default_factory()
        elif isinstance(kind, (EntityTupleField, PrimitiveTupleField)):
            kwargs[name] = ()
        elif isinstance(kind, EntityField):
            kwargs[name] = build(kind.type_, {})
        else:
            kwargs[name] = _default_primitive(kind.type_, name)
    return cls(**kwargs)


def _default_primitive(type_: type, name: str) -> Any:
    if type_ is ErrorCode:
        return ErrorCode.none
    try:
        return get_implicit_default(type_)
    except (KeyError, NotImplementedError, TypeError):
        return None


def _convert(kind: Any, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(kind, EntityField):
        return value if dataclasses.is_dataclass(value) else build(kind.type_, value)
    if isinstance(kind, EntityTupleField):
        return tuple(v if dataclasses.is_dataclass(v) else build(kind.type_, v) for v in value)
    if isinstance(kind, PrimitiveTupleField):
        return tuple(_primitive(kind.type_, v) for v in value)
    if isinstance(kind, PrimitiveField):
        return _primitive(kind.type_, value)
    return value


def _primitive(type_: type, value: Any) -> Any:
    if type_ in (i32Timedelta, i64Timedelta) or (isinstance(type_, type) and issubclass(type_, datetime.timedelta)):
        if isinstance(value, datetime.timedelta):
            return type_.parse(value)
        return type_.parse(datetime.timedelta(milliseconds=value))
    if type_ is TZAware and isinstance(value, int):
        return None if value < 0 else tz_aware_from_i64(i64(value))
    if type_ is ErrorCode:
        return value if isinstance(value, ErrorCode) else ErrorCode(value)
    if type_ is uuid.UUID and isinstance(value, (bytes, bytearray)):
        return uuid.UUID(bytes=bytes(value))
    return value
