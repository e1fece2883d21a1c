"""Domains: the values each figure of the report may take.

A figure outside its domain is an impossible number (a negative count, a share above 1, a negative
rate). The report never prints one: the figure is ``null`` in JSON and ``n/a`` in text, and the
section's ``not_available`` map says why in one line. Each section module declares ``DOMAINS`` next to
its figures and fills them through :class:`Figures`, which checks every value as it is set;
:mod:`exporter.report.schema` assembles the declarations of the whole document and checks it again.

Specs:

* :class:`Domain` for a number (``None`` is always allowed: n/a);
* :class:`Dist` for a :func:`~exporter.report.stats.distribution` dict of values of one domain;
* :class:`ListOf`, :class:`Range` (``[low, high]``, ``low <= high``), :class:`Row` (a fixed-length
  list), :class:`MapOf` (free keys, values of one spec), :class:`Record` (fixed keys);
* the markers :data:`LABEL` (text), :data:`FLAG` (bool), :data:`VERDICT` (``{code, text}``),
  :data:`FREE` (a free-form map kept as read, such as ``server_args``) and :data:`REASONS` (the
  ``not_available`` map): not figures, not range-checked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Domain:
    """Numbers in ``[low, high]``, whole when ``integer``; finite always."""

    name: str
    low: float = 0.0
    high: float = math.inf
    integer: bool = False

    def problem(self, x) -> str | None:
        """Why ``x`` is outside the domain, or ``None`` when it is inside (or ``None``: n/a)."""
        if x is None:
            return None
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            return f"{x!r} is not a number"
        if not math.isfinite(x):
            return f"{x} is not finite"
        if not self.low <= x <= self.high:
            return f"{x:g} is not {self.name}"
        if self.integer and x != int(x):
            return f"{x:g} is not a whole number"
        return None


#: Events, lines, requests, batches: whole and >= 0.
COUNT = Domain("a count (whole, >= 0)", integer=True)
#: Settings that must be at least 1 (intervals, ceilings, sizes, ranks).
POSITIVE = Domain("a whole number >= 1", low=1.0, integer=True)
#: Tokens (estimated ones may be fractional), seconds, rates, request-seconds, sizes: >= 0.
AMOUNT = Domain("an amount >= 0")
#: Shares and ratios of a whole: in [0, 1].
SHARE = Domain("a share in [0, 1]", high=1.0)
#: A time stamp in seconds (since the epoch, or of the day for time-only logs).
TIME = Domain("a time in seconds", low=-math.inf)
#: A signed change (baseline comparison).
SIGNED = Domain("a finite number", low=-math.inf)


@dataclass(frozen=True)
class Dist:
    """A distribution dict: ``count`` is a count, ``mean`` lies in ``of``'s bounds, percentiles and ``max`` in ``of``."""

    of: Domain


@dataclass(frozen=True)
class ListOf:
    of: object


@dataclass(frozen=True)
class Range:
    """``[low, high]`` of one domain with ``low <= high``."""

    of: Domain


@dataclass(frozen=True)
class Row:
    """A list of fixed length, one spec per position."""

    of: tuple


@dataclass(frozen=True)
class MapOf:
    """A map with free keys and values of one spec."""

    of: object


@dataclass(frozen=True)
class Record:
    """A map with fixed keys, one spec each; a key not declared is a violation."""

    fields: dict


@dataclass(frozen=True)
class _Marker:
    name: str


LABEL = _Marker("label")
FLAG = _Marker("flag")
VERDICT = _Marker("verdict")
FREE = _Marker("free")
REASONS = _Marker("reasons")


def _inside(values, domains: tuple) -> bool:
    """True when every value is inside its domain (a quick check; False sends to the full one)."""
    if not isinstance(values, (list, tuple)) or len(values) != len(domains):
        return False
    for x, d in zip(values, domains):
        if x is None:
            continue
        t = type(x)
        if not ((t is int or t is float) and d.low <= x <= d.high and x - x == 0 and (not d.integer or x == int(x))):
            return False
    return True


def dotted(path: tuple) -> str:
    """``("a", "b", 3, "c")`` -> ``"a.b[3].c"``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def violations(value, spec, path: tuple = ()) -> list[tuple[tuple, object, str]]:
    """Every place in ``value`` outside ``spec``: ``[(path, value, why)]`` (path: keys and indices from
    the top, see :func:`dotted`); ``[]`` when none."""
    out: list[tuple[tuple, object, str]] = []
    if value is None:
        return out
    if isinstance(spec, Domain):
        why = spec.problem(value)
        if why:
            out.append((path, value, why))
    elif isinstance(spec, Dist):
        if not isinstance(value, dict):
            return [(path, value, "not a distribution")]
        mean_domain = Domain(spec.of.name, spec.of.low, spec.of.high)
        for key, v in value.items():
            d = COUNT if key == "count" else mean_domain if key == "mean" else spec.of
            if key not in ("count", "mean", "max") and not key.startswith("p"):
                out.append((path + (key,), v, "not a key of a distribution"))
            else:
                out += violations(v, d, path + (key,))
    elif isinstance(spec, ListOf):
        if not isinstance(value, list):
            return [(path, value, "not a list")]
        of = spec.of
        plain = (of,) if isinstance(of, Domain) else of.of if isinstance(of, Row) and all(
            isinstance(d, Domain) for d in of.of) else None
        for i, v in enumerate(value):
            if plain is not None and _inside(v if isinstance(of, Row) else (v,), plain):
                continue  # the fast path of long lists (the timeline): nothing to report
            out += violations(v, of, path + (i,))
    elif isinstance(spec, Range):
        if not (isinstance(value, list) and len(value) == 2):
            return [(path, value, "not a [low, high] pair")]
        inner = violations(value[0], spec.of, path) + violations(value[1], spec.of, path)
        out += inner
        if not inner and value[0] is not None and value[1] is not None and value[0] > value[1]:
            out.append((path, value, "low above high"))
    elif isinstance(spec, Row):
        if not (isinstance(value, list) and len(value) == len(spec.of)):
            return [(path, value, f"not a list of {len(spec.of)}")]
        for i, (v, s) in enumerate(zip(value, spec.of)):
            out += violations(v, s, path + (i,))
    elif isinstance(spec, MapOf):
        if not isinstance(value, dict):
            return [(path, value, "not a map")]
        for k, v in value.items():
            out += violations(v, spec.of, path + (k,))
    elif isinstance(spec, Record):
        if not isinstance(value, dict):
            return [(path, value, "not a map")]
        for k, v in value.items():
            if k not in spec.fields:
                out.append((path + (k,), v, "a key without a declared domain"))
            else:
                out += violations(v, spec.fields[k], path + (k,))
    elif spec is FLAG:
        if not isinstance(value, bool):
            out.append((path, value, "not a flag"))
    elif spec is LABEL:
        if not isinstance(value, str):
            out.append((path, value, "not a label"))
    elif spec is VERDICT:
        if not (isinstance(value, dict) and set(value) == {"code", "text"}):
            out.append((path, value, "not a verdict"))
    elif spec is REASONS:
        if not (isinstance(value, dict) and all(isinstance(v, str) and v for v in value.values())):
            out.append((path, value, "not a map of reasons"))
    return out


def verdict(code: str, text: str) -> dict:
    """A section's verdict: a stable ``code`` and one or two sentences of ``text``."""
    return {"code": code, "text": text}


#: Start of the reason given by the last-resort check (:func:`exporter.report.schema.enforce`);
#: the tests require that it is never needed (every section gives its own reason).
UNEXPECTED = "computed value outside its domain"


class Figures:
    """One section's figures being built: each value is checked against its declared domain.

    Args:
        domains: The section's ``DOMAINS`` (``{key: spec}``); setting an undeclared key raises
            ``KeyError`` (a figure without a domain is a bug).

    ``set(key, value, why)`` stores ``value`` when it is inside its domain, else ``None``; ``why`` is the
    one-line reason shown when the figure is ``None`` (not known, or outside its domain). ``done()``
    returns the section dict with ``not_available`` (``{key: reason}``) last.
    """

    def __init__(self, domains: dict):
        self.domains = domains
        self.values: dict = {}
        self.na: dict[str, str] = {}

    def set(self, key: str, value, why: str | None = None):
        """Store a figure (see the class docstring); returns what was stored."""
        spec = self.domains[key]
        problems = violations(value, spec, (key,)) if value is not None else []
        if problems:
            if why is None:
                why = f"{UNEXPECTED}: {problems[0][2]}"
            value = None
        if value is None and why:
            self.na[key] = why
        elif value is not None:
            self.na.pop(key, None)
        self.values[key] = value
        return value

    def put(self, key: str, value):
        """Store a value that is not a range-checked figure (a label, a verdict, a free map)."""
        self.domains[key]  # noqa: B018 - declared, or KeyError
        self.values[key] = value
        return value

    def done(self) -> dict:
        out = dict(self.values)
        out["not_available"] = dict(self.na)
        return out
