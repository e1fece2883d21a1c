"""Families that hold their series raw and write the text format from cached line prefixes.

On a busy server every scheduler's histograms change between scrapes (a cumulative bucket changes
above every new observation), so reusing a family's text does not help there: the cost is per sample,
in the client library (a ``Sample`` tuple and a labels dict per bucket, then per sample the label
formatting and ``floatToGoString``). :class:`RawFamily` keeps what ``add_metric`` is given instead,
and :class:`TextCache` writes the text format's lines as ``prefix + value``:

* a series' **prefixes** (``name{labels} ``, one per line: every bucket, ``_count``, ``_sum``) are
  cut from the library's own output for that series with zero values, once per label set and bound
  set, and kept across renders while the series exists;
* the **values** are formatted by the library's ``floatToGoString`` (integer counts memoised within
  one render: a histogram's upper buckets repeat the same count); a histogram series whose integer
  counts and sum text are those of the previous render reuses its text.

So every byte is the library's: ``tests/test_text.py`` requires the body to equal
``generate_latest``'s over the same registry. Everything else (OpenMetrics, the ``name[]`` filter, any
other reader of ``samples``) gets the library's samples, built on first use by the library's family
class from the same ``add_metric`` calls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

from prometheus_client.core import Metric
from prometheus_client.utils import floatToGoString

_FIRST = itemgetter(0)
_SECOND = itemgetter(1)


class RawFamily(Metric):
    """A family as ``make``'s library class would build it, its series kept as given (no ``Sample``
    until someone reads ``samples``).

    Args:
        make: Returns a new empty library family of this name, help, type and labels (e.g.
            :func:`exporter.metrics.families.family` of a row), called when ``samples`` are first read.
        like: A family of ``make`` whose name, help, unit and type this one takes (``make()``'s if
            ``None``): a collector builds it once, not per scrape.

    Attributes:
        series: ``[(label values, value)]`` for counters and gauges, ``[(label values, buckets, sum)]``
            for histograms (``buckets`` as ``HistogramMetricFamily.add_metric`` takes them: ``(le
            text, cumulative count)`` pairs, ``+Inf`` last), in ``add_metric`` order.
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
        histogram (the library's ``add_metric`` arguments, without timestamps)."""
        self._samples = None
        if self.type == "histogram":
            self.series.append((tuple(labels), value, sum_value))
        elif sum_value is not None:
            raise TypeError(f"{self.name}: a {self.type} series takes labels and one value")
        else:
            self.series.append((tuple(labels), value))

    @property
    def samples(self) -> list:
        """The library's samples for these series (built on first read, by the library's class)."""
        if self._samples is None:
            fam = self._make()
            for s in self.series:
                fam.add_metric(*s)
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
    """Writes :class:`RawFamily` text for one text-format encoder, with prefixes kept across renders.

    Args:
        encoder: The library's text-format encoder (``generate_latest``, or its ``escaping`` variant
            from ``choose_encoder``): the source of every header and prefix.

    A prefix set not used by a render is dropped at the next :meth:`end` (series of a scheduler that
    went away do not accumulate).
    """

    def __init__(self, encoder: Callable[[Any], bytes]):
        self.encoder = encoder
        self._headers: dict[tuple, str] = {}
        self._prefixes: dict[tuple, _Series] = {}
        self._used: dict[tuple, _Series] = {}

    def text(self, fam: RawFamily) -> bytes:
        """The text-format lines of ``fam``, header first, UTF-8: ``encoder``'s output for it, byte
        for byte (the encoder itself runs where a series' shape is unusual)."""
        head_key = (fam.name, fam.documentation, fam.type, fam.unit)
        head = self._headers.get(head_key)
        if head is None:
            head = self._headers[head_key] = self._lines(fam._make())
        out = [head]
        memo = _Memo()
        hist = fam.type == "histogram"
        for s in fam.series:
            if hist:
                key = (head_key, s[0], tuple(map(_FIRST, s[1])), s[2] is None)
            else:
                key = (head_key, s[0])
            entry = self._used.get(key)
            if entry is None:
                entry = self._prefixes.get(key)
                if entry is None:
                    entry = _Series(self._derive(fam, s))
                self._used[key] = entry
            if entry.prefixes is None:  # a shape the fast path does not mirror: the library writes it
                one = fam._make()
                one.add_metric(*s)
                out.append(self._lines(one, header=False))
            elif hist:
                out.append(entry.histogram(list(map(_SECOND, s[1])), s[2], memo))
            else:
                out.append(entry.prefixes[0] + floatToGoString(s[1]) + "\n")
        return "".join(out).encode("utf-8")

    def end(self) -> None:
        """Close one render: keep only the prefixes it used."""
        self._prefixes = self._used
        self._used = {}

    def _lines(self, fam: Metric, header: bool = True) -> str:
        text = self.encoder(One(fam)).decode("utf-8")
        if header:
            return text
        return text.split("\n", 2)[2]

    def _derive(self, fam: RawFamily, s: tuple) -> list[str] | None:
        """The series' line prefixes (``name{labels} ``, each followed by its value), cut from
        the library's text for it with every value 0; ``None`` where that text is not one line per
        value in the order :meth:`text` writes them."""
        one = fam._make()
        if fam.type == "histogram":
            labels, buckets, _ = s
            if any(len(b) != 2 for b in buckets):
                return None  # exemplars: the library writes them
            one.add_metric(labels, [(b[0], 0) for b in buckets], None if s[2] is None else 0)
            want = (len(buckets), len(buckets) + 2)
        else:
            one.add_metric(s[0], 0)
            want = (1,)
        lines = self._lines(one, header=False).split("\n")
        if lines[-1] != "" or len(lines) - 1 not in want:
            return None
        prefixes = []
        for line in lines[:-1]:
            if not line.endswith(" 0.0"):
                return None
            prefixes.append(line[:-3])
        return prefixes


_INT_ONLY = frozenset((int,))


class _Memo(dict):
    """``floatToGoString`` of ints, memoised (a histogram's upper buckets repeat one count). Only
    ever indexed with plain ints: a float key would find an int's text, and ``-0.0 == 0``."""

    def __missing__(self, c: int) -> str:
        t = self[c] = floatToGoString(c)
        return t


class _Series:
    """One series' line prefixes (``None``: the library writes this series) and, for a histogram,
    its last text with the integer counts and the sum text it was written from (reused while both
    are the same: a histogram no new line touched)."""

    __slots__ = ("prefixes", "counts", "sum_text", "text")

    def __init__(self, prefixes: list[str] | None):
        self.prefixes = prefixes
        self.counts: list[int] | None = None
        self.sum_text = ""
        self.text = ""

    def histogram(self, counts: list, total: Any, memo: _Memo) -> str:
        """The series' lines for these cumulative bucket counts (``+Inf`` last) and sum."""
        prefixes = self.prefixes
        with_sum = len(prefixes) == len(counts) + 2
        sum_text = floatToGoString(total) if with_sum else ""
        if not _INT_ONLY >= set(map(type, counts)):  # not all ints: -0.0 is 0 to ==, NaN is not NaN
            self.counts = None
            values = list(map(floatToGoString, counts))
        elif counts == self.counts and sum_text == self.sum_text:
            return self.text
        else:
            self.counts = counts
            values = list(map(memo.__getitem__, counts))
        if with_sum:
            values.append(values[-1])
            values.append(sum_text)
        self.sum_text = sum_text
        self.text = "\n".join(map(str.__add__, prefixes, values)) + "\n"
        return self.text


class One:
    """One family, as the encoders read a registry (``encoder(One(family))`` is that family's text)."""

    __slots__ = ("family",)

    def __init__(self, family: Metric):
        self.family = family

    def collect(self) -> tuple[Metric]:
        return (self.family,)
