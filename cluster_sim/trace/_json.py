"""``json.loads`` for trace readers: every way a line can fail is one TraceError naming file, line and field."""
from __future__ import annotations

import json
import re
import sys

from cluster_sim.errors import TraceError

_KEY_RE = re.compile(r'"([^"\\]+)"\s*:')


def last_key_before(text: str, pos: int) -> str | None:
    """The last ``"key":`` before ``pos`` — the field a broken line broke off in."""
    keys = _KEY_RE.findall(text[:pos])
    return keys[-1] if keys else None


def loads(raw: bytes, path: str, line: int, *, multiline: bool = False):
    """Parse one JSON document; ``multiline``: ``raw`` is a whole file, errors name the JSON's own line.

    Besides invalid and truncated JSON this covers nesting deeper than Python's
    recursion limit and integers longer than Python's int-conversion limit
    (4300 digits by default), which ``json.loads`` raises as RecursionError and
    a plain ValueError."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise TraceError(path, "invalid JSON: nested too deeply", line=line) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        text = raw.decode("utf-8", errors="replace")
        pos = getattr(exc, "pos", len(text))
        kind = "truncated JSON" if pos >= len(text.rstrip()) else "invalid JSON"
        where = exc.lineno if multiline and hasattr(exc, "lineno") else line
        raise TraceError(path, f"{kind}: {exc}", line=where, field=last_key_before(text, pos)) from None
    except ValueError as exc:   # an integer of more digits than int() converts
        text = raw.decode("utf-8", errors="replace")
        limit = sys.get_int_max_str_digits()
        m = re.search(r"\d{%d,}" % (limit + 1), text) if limit else None
        if m is None:
            raise TraceError(path, f"invalid JSON: {exc}", line=line) from None
        where = line + text.count("\n", 0, m.start()) if multiline else line
        raise TraceError(path, f"invalid JSON: an integer of more than {limit} digits", line=where,
                         field=last_key_before(text, m.start())) from None
