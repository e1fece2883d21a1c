"""Prometheus families from the metric table: empty ones for ``describe()``, filled ones for ``collect()``.

Every collector builds its families here from its rows of :data:`exporter.metrics.TABLE` and fills
them by resolving each row's read path in its own snapshot (:func:`fill`), so that the table decides
names, types, labels, HELP texts and buckets, and a collector only decides what its snapshot is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from types import MappingProxyType
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from . import rows
from .defs import COUNTER, GAUGE, HISTOGRAM, MetricDef
from .text import RawFamily

_CLASSES = {COUNTER: CounterMetricFamily, GAUGE: GaugeMetricFamily, HISTOGRAM: HistogramMetricFamily}


def family(m: MetricDef) -> Metric:
    """An empty family for a row (the client library drops a counter's ``_total`` from the family name)."""
    return _CLASSES[m.type](m.family, m.help, labels=m.labels)


def describe(collector: str) -> Iterator[Metric]:
    """The families of one collector, without samples: what its ``describe()`` yields, so that the
    registry knows its names (``/metrics?name[]=...``, and duplicate registrations fail)."""
    return iter([family(m) for m in rows(collector)])


class Compiled:
    """A collector's rows with their read paths split once (a scrape only walks them).

    Args:
        collector: The collector's name in the table.
        where: Keep only the rows for which ``where(row)`` is true (all by default).

    Attributes:
        rows: ``(row, steps, histogram)`` triples, ``steps`` being ``[(label value or None, path parts,
            plain), ...]`` where ``plain`` says the path has no ``*`` step.
    """

    def __init__(self, collector: str, where: Callable[[MetricDef], bool] | None = None):
        self.rows: list[tuple[MetricDef, list[tuple[str | None, tuple[str, ...], bool]], bool]] = []
        for m in rows(collector):
            if where is not None and not where(m):
                continue
            reads = [(None, m.read)] if isinstance(m.read, str) else list(m.read)
            steps = [(value, tuple(path.split(".")), "*" not in path.split(".")) for value, path in reads]
            self.rows.append((m, steps, m.type == HISTOGRAM))
        self._raw: list[tuple[str, Callable[[], Metric], Metric]] | None = None

    def families(self, raw: bool = False) -> dict[str, Metric]:
        """Fresh empty families, by row name, in table order: the library's classes, or with ``raw``
        :class:`~exporter.metrics.text.RawFamily` ones (series kept as given; the renderer writes
        them from cached templates: for collectors of many series)."""
        if not raw:
            return {m.name: family(m) for m, _, _ in self.rows}
        if self._raw is None:
            self._raw = [(m.name, partial(family, m), family(m)) for m, _, _ in self.rows]
        return {name: RawFamily(make, like) for name, make, like in self._raw}


_MAPPINGS = (dict, MappingProxyType)


def _walk(obj: Any, parts: Sequence[str], i: int, labels: tuple[str, ...], out: list) -> None:
    n = len(parts)
    while i < n:
        if obj is None:
            return
        part = parts[i]
        if part == "*":
            for key, value in sorted(obj.items()):
                _walk(value, parts, i + 1, labels + _key(key), out)
            return
        obj = obj.get(part) if isinstance(obj, _MAPPINGS) else getattr(obj, part, None)
        i += 1
    if obj is None:
        return
    if isinstance(obj, _MAPPINGS):
        for key, value in sorted(obj.items()):
            if value is not None:
                out.append((labels + _key(key), value))
    else:
        out.append((labels, obj))


def _key(key: Any) -> tuple[str, ...]:
    return tuple(str(k) for k in key) if type(key) is tuple else (str(key),)


def fill(fams: Mapping[str, Metric], compiled: Compiled, obj: Any, prefix: tuple[str, ...] = (),
         skip: Any = None) -> None:
    """Add the samples ``obj`` holds for every row, its label values after ``prefix``.

    Args:
        fams: The families being filled, by row name (:meth:`Compiled.families`).
        compiled: The collector's rows.
        obj: The snapshot (or one item of it, e.g. one scheduler).
        prefix: Leading label values (a scheduler's identity).
        skip: ``skip(row)`` true leaves that row empty for this ``obj`` (idle schedulers' latest values).
    """
    for m, steps, hist in compiled.rows:
        if skip is not None and skip(m):
            continue
        fam = fams[m.name]
        for value, parts, plain in steps:
            labels = prefix if value is None else (*prefix, value)
            if plain:  # the common case: one attribute or key after another, to one value
                o = obj
                for part in parts:
                    if o is None:
                        break
                    o = o.get(part) if isinstance(o, _MAPPINGS) else getattr(o, part, None)
                if o is None:
                    continue
                if not isinstance(o, _MAPPINGS):
                    if hist:
                        _add_histogram(fam, labels, o)
                    else:
                        fam.add_metric(labels, int(o) if o is True or o is False else o)
                    continue
            out: list = []
            _walk(obj, parts, 0, labels, out)
            for series_labels, v in out:
                add(fam, m, series_labels, v)


def add(fam: Metric, m: MetricDef, labels: Sequence[str], value: Any) -> None:
    """One series: a number (a bool is 0/1), or for a histogram an object with ``bounds``,
    ``cumulative`` (``+Inf`` last) and ``sum``."""
    if m.type == HISTOGRAM:
        _add_histogram(fam, labels, value)
    else:
        fam.add_metric(labels, int(value) if value is True or value is False else value)


_LE: dict[tuple[float, ...], tuple[str, ...]] = {}


def _add_histogram(fam: Metric, labels: Sequence[str], h: Any) -> None:
    les = _LE.get(h.bounds)
    if les is None:  # a bound as the le label value (1.0, 0.0025), as the client library writes it; +Inf last
        les = _LE[h.bounds] = (*(repr(float(b)) for b in h.bounds), "+Inf")
    if isinstance(fam, RawFamily):  # the counts as they are: no bucket pairs (exporter/metrics/text.py)
        fam.add_histogram(labels, les, h.cumulative, h.sum)
    else:
        fam.add_metric(labels, list(zip(les, h.cumulative)), h.sum)
