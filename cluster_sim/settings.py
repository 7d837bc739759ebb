"""Typed settings: a settings dataclass declares each key once, with its default, type, limits and
unit, and :func:`parse` checks a mapping against it.

Every configuration section (``hardware``, ``hardware.ssd``, ``workload``, ``fleet``, and each
policy's parameters) is such a dataclass; it is the only place a default is written. Hydra's
composed config gets the same defaults from :func:`defaults` (registered as schema nodes that the
YAML files under ``conf/`` extend, see :mod:`cluster_sim.schema_store`), so a YAML file carries
only what differs from the schema. A field is declared with :func:`setting`::

    @dataclass(frozen=True)
    class Params:
        tau_s: float = setting(600.0, lo=0, lo_open=True, unit="s", doc="forgetting time constant")
        crp: float | str = setting("request", words=("request",), lo=0, unit="s")

Every error is a :class:`~cluster_sim.errors.ConfigError` naming the dotted key, one line.
Cross-field rules go in the dataclass's ``check(self, prefix)``, called after the fields parsed.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Mapping

from .errors import ConfigError
from .units import parse_bytes, parse_number, parse_rate

_BOOL_WORDS = {"true": True, "false": False, "yes": True, "no": False, "1": True, "0": False}
KINDS = ("number", "bytes", "rate", "choice", "bool", "text", "mapping", "section", "any")


@dataclass(frozen=True)
class Spec:
    """How one key is read: its kind and limits (see :func:`setting`)."""
    kind: str = "number"
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    integer: bool = False
    allow_none: bool = False
    allow_inf: bool = False
    choices: tuple = ()
    words: tuple = ()          # literal words accepted besides the kind (e.g. auto, all, request)
    section: Any = None        # kind=section: the nested settings dataclass
    unit: str = ""
    doc: str = ""
    expect: str = ""           # replaces the kind's own wording in an error ("expected <expect>, got ...")


def setting(default=MISSING, kind: str = "number", *, default_factory=MISSING, **spec) -> Any:
    """A dataclass field carrying its :class:`Spec`. ``kind``: number (``lo``/``hi``, ``lo_open``,
    ``hi_open``, ``integer``, ``allow_inf``), bytes (a size, ``100GB``), rate (``25GB/s``, > 0),
    choice (``choices``), bool, text, mapping, section (a nested settings dataclass, ``section=``),
    any. ``allow_none`` admits null; ``words`` admits literal words (matched without case)."""
    if kind not in KINDS:
        raise ValueError(f"unknown setting kind {kind!r}")
    if "choices" in spec:
        spec["choices"] = tuple(spec["choices"])
    if "words" in spec:
        spec["words"] = tuple(w.lower() for w in spec["words"])
    meta = {"setting": Spec(kind=kind, **spec)}
    if default_factory is not MISSING:
        return field(default_factory=default_factory, metadata=meta)
    return field(default=default, metadata=meta)


def spec_of(f: dataclasses.Field) -> Spec:
    return f.metadata.get("setting") or Spec(kind="any")


def _number(key: str, s: Spec, value):
    v = parse_number(key, value, lo=s.lo, hi=s.hi, integer=s.integer, lo_open=s.lo_open, allow_inf=s.allow_inf)
    if s.hi_open and s.hi is not None and v >= s.hi:
        raise ConfigError(key, f"must be < {s.hi}, got {value!r}")
    return v


def check_value(key: str, s: Spec, value):
    """``value`` read as ``s`` says; a ConfigError names ``key``."""
    if value is None:
        if s.allow_none or s.kind == "any":
            return None
        raise ConfigError(key, "is required" if not s.words else f"expected {_expected(s)}, got None")
    if s.words and isinstance(value, str) and value.strip().lower() in s.words:
        return value.strip().lower()
    try:
        return _check_kind(key, s, value)
    except ConfigError as e:
        # a number out of its limits keeps the limit's own message; anything else that is not
        # of the kind is named with what the key takes (the words included)
        if (s.words or s.expect) and not (isinstance(value, (int, float)) and not isinstance(value, bool)):
            raise ConfigError(key, f"expected {_expected(s)}, got {value!r}") from None
        raise e


def _expected(s: Spec) -> str:
    if s.expect:
        return s.expect
    words = " or ".join(repr(w) for w in s.words)
    what = {"number": "a number", "bytes": "a size (e.g. 100GB)", "rate": "a rate (e.g. 25GB/s)"}.get(s.kind, s.kind)
    lim = ""
    if s.kind == "number" and s.lo is not None:
        lim = f" {'>' if s.lo_open else '>='} {s.lo:g}"
    if s.kind == "number" and s.integer:
        what = "a whole number"
    if s.kind == "bytes" and s.lo_open:
        what = "a positive size"
    return f"{words} or {what}{lim}" if words else f"{what}{lim}"


def _check_kind(key: str, s: Spec, value):
    k = s.kind
    if k == "number":
        return _number(key, s, value)
    if k == "bytes":
        b = parse_bytes(value, key)
        if s.lo_open and b <= 0:
            raise ConfigError(key, f"must be a positive size, got {value!r}")
        return b
    if k == "rate":
        return parse_rate(value, key)
    if k == "choice":
        if isinstance(value, bool) or value not in s.choices:
            raise ConfigError(key, f"must be one of {', '.join(map(str, s.choices))}; got {value!r}")
        return value
    if k == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _BOOL_WORDS:
            return _BOOL_WORDS[value.strip().lower()]
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise ConfigError(key, f"expected true or false, got {value!r}")
    if k == "text":
        if isinstance(value, (Mapping, list, tuple)):
            raise ConfigError(key, f"expected a string, got {value!r}")
        return str(value)
    if k == "mapping":
        if not isinstance(value, Mapping):
            raise ConfigError(key, f"expected a mapping, got {value!r}")
        return dict(value)
    if k == "section":
        if not isinstance(value, Mapping):
            raise ConfigError(key, f"expected a mapping of {s.section.__name__} keys, got {value!r}")
        return parse(s.section, value, key)
    return value


def unknown_key(cls, key: str, prefix: str, message: str | None = None) -> ConfigError:
    names = [f.name for f in fields(cls)]
    return ConfigError(f"{prefix}.{key}" if prefix else str(key),
                       message or f"unknown key; known keys here: {', '.join(sorted(names)) or 'none'}")


def parse(cls, m: Mapping | None, prefix: str, *, unknown: str | None = None, skip: tuple = ()):
    """An instance of the settings dataclass ``cls`` from ``m``: unknown keys fail (``unknown``
    replaces the message), every given key is read by its :class:`Spec`, absent keys take the
    schema default, then ``cls.check(self, prefix)`` if defined. ``skip``: keys the caller reads."""
    m = dict(m or {})
    names = {f.name for f in fields(cls)}
    for k in m:
        if k not in names and k not in skip:
            raise unknown_key(cls, k, prefix, unknown)
    values = {}
    for f in fields(cls):
        if f.name in skip:
            continue
        if f.name in m:
            v = m[f.name]
        elif f.default is not MISSING:
            v = f.default              # read as a given value would be (1 -> 1.0 for a float)
        else:
            continue
        values[f.name] = check_value(f"{prefix}.{f.name}" if prefix else f.name, spec_of(f), v)
    obj = cls(**values)
    check = getattr(obj, "check", None)
    if check is not None:
        check(prefix)
    return obj


def defaults(cls) -> dict:
    """The schema defaults of ``cls`` as a plain mapping (nested sections as mappings), in field
    order: what Hydra's composed config starts from."""
    out = {}
    for f in fields(cls):
        if f.default is not MISSING:
            v = f.default
        elif f.default_factory is not MISSING:
            v = f.default_factory()
        else:
            continue
        if dataclasses.is_dataclass(v):
            v = defaults(type(v))
        out[f.name] = v
    return out


def same_value(a, b) -> bool:
    """Equality of two parsed setting values (``inf == inf``, ``1 == 1.0``, dataclasses field-wise)."""
    if dataclasses.is_dataclass(a) and dataclasses.is_dataclass(b):
        return dataclasses.asdict(a) == dataclasses.asdict(b)
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return a == b
