"""Families that hold their series raw and write their exposition text from cached line templates.

On a busy server every scheduler's histograms change between scrapes (a cumulative bucket changes
above every new observation), so reusing a family's text does not help there: the cost is per sample,
in the client library (a ``Sample`` tuple and a labels dict per bucket, then per sample the label
formatting and ``floatToGoString``). :class:`RawFamily` keeps what ``add_metric`` is given instead
(a histogram's counts as the scheduler snapshot holds them, no bucket pairs), and :class:`TextCache`
writes each series' lines from one template:

* a series' **template** is the library's own output for that series (every line: each bucket,
  ``_count``, ``_sum``) with its values cut out, derived once per label set and bound set and kept
  across renders while the series exists; it serves one encoder: the text format or OpenMetrics,
  whose lines differ only in what the encoder writes (``# EOF``, ``# UNIT``, escaping);
* the **values** are formatted by the library's ``floatToGoString`` (integer counts memoised within
  one render: a histogram's upper buckets repeat the same count) and put in with ``bytes %``.

So every byte is the library's: ``tests/test_text.py`` requires the body to equal the library
encoder's (``generate_latest`` of the text format and of OpenMetrics) over the same registry.
Everything else (the ``name[]`` filter, any other reader of ``samples``) gets the library's samples,
built on first use by the library's family class from the same ``add_metric`` calls. Per series the
cache holds the template (about the series' text less its values) and nothing else: a text kept for
reuse would double what the largest scrapes hold (docs/performance.md, memory).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from prometheus_client.core import Metric
from prometheus_client.utils import floatToGoString

class RawFamily(Metric):
    """A family as ``make``'s library class would build it, its series kept as given (no ``Sample``
    until someone reads ``samples``).

    Args:
        make: Returns a new empty library family of this name, help, type and labels (e.g.
            :func:`exporter.metrics.families.family` of a row), called when ``samples`` are first read.
        like: A family of ``make`` whose name, help, unit and type this one takes (``make()``'s if
            ``None``): a collector builds it once, not per scrape.

    Attributes:
        series: ``[(label values, value)]`` for counters and gauges; for histograms ``[(label values,
            le texts, cumulative counts, sum)]``, one count per ``le`` text (``+Inf`` last), or
            ``(label values, None, buckets, sum)`` for buckets with exemplars; in ``add_metric``
            order.
    """

    def __init__(self, make: Callable[[], Metric], like: Metric | None = None):  # noqa: D107
        proto = make() if like is None else like  # Metric.__init__ is not called: no samples list
        self._make = make
        self.name = proto.name
        self.documentation = proto.documentation
        self.unit = proto.unit
        self.type = proto.type
        self.series: list[tuple] = []
        self._samples: list | None = None

    def add_metric(self, labels: Sequence[str], value: Any, sum_value: Any = None) -> None:
        """One series: ``(labels, value)`` for a counter or gauge, ``(labels, buckets, sum)`` for a
        histogram (the library's ``add_metric`` arguments, without timestamps: ``buckets`` are
        ``(le text, cumulative count)`` pairs, ``+Inf`` last, or triples with an exemplar)."""
        if self.type == "histogram":
            if all(len(b) == 2 for b in value):
                self.add_histogram(labels, tuple(b[0] for b in value), tuple(b[1] for b in value), sum_value)
            else:
                self._samples = None
                self.series.append((tuple(labels), None, tuple(value), sum_value))
        elif sum_value is not None:
            raise TypeError(f"{self.name}: a {self.type} series takes labels and one value")
        else:
            self._samples = None
            self.series.append((tuple(labels), value))

    def add_histogram(self, labels: Sequence[str], les: tuple[str, ...], counts: Sequence, sum_value: Any) -> None:
        """One histogram series without building its bucket pairs: ``les`` the ``le`` label texts
        (``+Inf`` last; one tuple shared by every series of these bounds), ``counts`` the cumulative
        count of each, ``sum_value`` the sum (``None``: no ``_count`` or ``_sum``). Both sequences are
        kept as given, not copied."""
        self._samples = None
        self.series.append((tuple(labels), les, counts, sum_value))

    def arguments(self, s: tuple) -> tuple:
        """The library's ``add_metric`` arguments for one item of :attr:`series`."""
        if self.type != "histogram":
            return s
        labels, les, counts, total = s
        return labels, counts if les is None else list(zip(les, counts)), total

    @property
    def samples(self) -> list:
        """The library's samples for these series (built on first read, by the library's class)."""
        if self._samples is None:
            fam = self._make()
            for s in self.series:
                fam.add_metric(*self.arguments(s))
            self._samples = fam.samples
        return self._samples

    @samples.setter
    def samples(self, value: list) -> None:
        self._samples = value


def has_samples(fam: Metric) -> bool:
    """Whether ``fam`` has a sample, without building a :class:`RawFamily`'s samples (each of its
    series is at least one sample)."""
    return bool(fam.series) if isinstance(fam, RawFamily) else bool(fam.samples)


class TextCache:
    """Writes :class:`RawFamily` text for one encoder of the library (the text format or
    OpenMetrics), with each series' line prefixes kept across renders.

    Args:
        encoder: The library's encoder (``generate_latest``, its ``escaping`` variant from
            ``choose_encoder``, or ``prometheus_client.openmetrics.exposition.generate_latest`` and its
            variants): the source of every header and prefix. OpenMetrics' closing ``# EOF`` is not
            part of a family's text (the renderer ends the body with it).

    A series' template is one ``bytes``, the library's lines for that series with each value cut
    out (``%`` doubled, ``%s`` in the value's place): about the series' text less its values. Each
    render of a family keeps the templates of that family's series it wrote and drops the rest
    (series of a scheduler that went away do not accumulate); a family not written (the renderer
    reused its text) keeps its templates.
    """

    def __init__(self, encoder: Callable[[Any], bytes]):
        self.encoder = encoder
        self._headers: dict[tuple, bytes] = {}
        self._series: dict[tuple, dict[tuple, _Series]] = {}  # by family (head key), then series key

    def __len__(self) -> int:
        """Series whose templates are held."""
        return sum(map(len, self._series.values()))

    def text(self, fam: RawFamily) -> bytes:
        """The lines of ``fam``, header first, UTF-8: ``encoder``'s output for it (less OpenMetrics'
        ``# EOF``), byte for byte."""
        return b"".join(self.parts(fam))

    def parts(self, fam: RawFamily) -> list[bytes]:
        """:meth:`text` as the pieces that join to it: the header, each histogram series' lines, then
        the other series' lines together (the encoder itself writes a series whose shape the
        template does not mirror: buckets with exemplars)."""
        head_key = (fam.name, fam.documentation, fam.type, fam.unit)
        head = self._headers.get(head_key)
        if head is None:
            head = self._headers[head_key] = self._lines(fam._make())
        out = [head]
        lines: list[bytes] = []  # single-line series, joined into one piece
        memo = _Memo()
        hist = fam.type == "histogram"
        kept = self._series.get(head_key, {})
        used: dict[tuple, _Series] = {}
        for s in fam.series:
            key = (s[0], s[1], s[3] is None) if hist else s[0]
            entry = used.get(key)
            if entry is None:
                entry = kept.get(key)
                if entry is None:
                    entry = _Series(*(self._derive(fam, s) or (None, 0)))
                used[key] = entry
            if entry.template is None:  # a shape the fast path does not mirror: the library writes it
                one = fam._make()
                one.add_metric(*fam.arguments(s))
                text = self._lines(one)[len(head):]
                (out if hist else lines).append(text)
            elif hist:
                out.append(entry.histogram(s[2], s[3], memo))
            else:
                lines.append(entry.template + _go(s[1]) + b"\n")
        self._series[head_key] = used
        if lines:
            out.append(b"".join(lines))
        return out

    def _lines(self, fam: Metric) -> bytes:
        """``encoder``'s text of one family, less OpenMetrics' closing ``# EOF``."""
        text = self.encoder(One(fam))
        return text[:-len(_EOF)] if text.endswith(_EOF) else text

    def _derive(self, fam: RawFamily, s: tuple) -> tuple[bytes, int] | None:
        """The series' template, cut from the library's text for it with every value distinct (so
        each line is known to end with the value it was given, in the order :meth:`parts` fills
        them), and its number of values: a counter's or gauge's line less its value; a histogram's
        lines with ``%s`` for each value. ``None`` where that text is not one line per value, in that
        order."""
        one = fam._make()
        if fam.type == "histogram":
            labels, les, _, total = s
            if les is None:
                return None  # exemplars: the library writes them
            n = len(les)
            one.add_metric(labels, [(le, i + 1) for i, le in enumerate(les)], None if total is None else n + 1)
            given = [list(range(1, n + 1)), [*range(1, n + 1), n, n + 1]]  # _count: the +Inf count
        else:
            one.add_metric(s[0], 1)
            given = [[1]]
        head = self._headers[(fam.name, fam.documentation, fam.type, fam.unit)]
        text = self._lines(one)
        if not text.startswith(head) or not text.endswith(b"\n"):
            return None
        lines = text[len(head):-1].split(b"\n")
        values = next((g for g in given if len(g) == len(lines)), None)
        if values is None:
            return None
        cut = []
        for line, v in zip(lines, values):
            value = b" " + _go(v)
            if not line.endswith(value):
                return None
            cut.append(line[:-len(value) + 1])
        if fam.type != "histogram":
            return cut[0], 1
        return b"".join(c.replace(b"%", b"%%") + b"%s\n" for c in cut), len(cut)


_EOF = b"# EOF\n"
_INT_ONLY = frozenset((int,))


def _go(value: Any) -> bytes:
    """The library's ``floatToGoString`` of ``value``, as bytes (its text is ASCII)."""
    return floatToGoString(value).encode("ascii")


class _Memo(dict):
    """:func:`_go` of ints, memoised (a histogram's upper buckets repeat one count). Only ever
    indexed with plain ints: a float key would find an int's text, and ``-0.0 == 0``."""

    def __missing__(self, c: int) -> bytes:
        t = self[c] = _go(c)
        return t


class _Series:
    """One series' template (``None``: the library writes this series) and its number of values."""

    __slots__ = ("template", "n")

    def __init__(self, template: bytes | None, n: int):
        self.template = template
        self.n = n

    def histogram(self, counts: Sequence, total: Any, memo: _Memo) -> bytes:
        """The series' lines for these cumulative bucket counts (``+Inf`` last) and sum."""
        if _INT_ONLY >= set(map(type, counts)):
            values = list(map(memo.__getitem__, counts))
        else:  # not all ints: -0.0 is 0 and True is 1 to a dict, but the library writes them apart
            values = list(map(_go, counts))
        if self.n == len(counts) + 2:
            values.append(values[-1])
            values.append(_go(total))
        return self.template % tuple(values)


class One:
    """One family, as the encoders read a registry (``encoder(One(family))`` is that family's text)."""

    __slots__ = ("family",)

    def __init__(self, family: Metric):
        self.family = family

    def collect(self) -> tuple[Metric]:
        return (self.family,)
