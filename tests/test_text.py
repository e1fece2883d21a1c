"""The fast path (``exporter/metrics/text.py``) against the client library, byte for byte, in the text
format and in OpenMetrics (what Prometheus negotiates first).

The scheduler collector's families are :class:`RawFamily` objects whose text the renderer writes from
cached line templates. Here every such text is compared with the library's encoder of that format
(``generate_latest`` of ``prometheus_client`` and of ``prometheus_client.openmetrics.exposition``, and
their escaping variants) over the very same family (the library builds its samples from the same
``add_metric`` calls): on every corpus log, on the bench's 8-DP state over several scrapes with every
DP rank changed, and on generated values and labels (counts from 0 past 1e6 where Go switches to
exponents, -0.0, NaN, infinities, huge and tiny sums, label values with quotes, backslashes, newlines
and non-ASCII, a unit). ``name[]`` stays the library's own encoder over the families' samples.
"""

from __future__ import annotations

import math
import re
import sys
from functools import partial

import pytest
from conftest import CORPUS, ROOT, corpus_files
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.openmetrics.exposition import generate_latest as om_latest

from exporter.cli import build_registry
from exporter.exposition import Renderer
from exporter.metrics.text import One, RawFamily, TextCache, has_samples
from exporter.scheduler.collector import SchedulerCollector
from exporter.scheduler.state import SchedulerStates
from exporter.scheduler.store import SchedulerStore
from exporter.sources.log.source import LogSource

sys.path.insert(0, str(ROOT / "bench"))
from render import _dp_lines  # noqa: E402 - the bench's own 8-DP re-tagging

#: Series whose value is the moment's (the self-metrics' durations): differ between two encodings.
VOLATILE = re.compile(rb"^sglang_exporter_collector_duration_seconds\{.*\n", re.M)


#: The encoders the fast path serves: the text format, OpenMetrics, and an escaping variant of each.
ENCODERS = {
    "text": generate_latest,
    "openmetrics": om_latest,
    "text-utf8": choose_encoder("text/plain; version=1.0.0; escaping=allow-utf-8")[0],
    "openmetrics-utf8": choose_encoder("application/openmetrics-text; version=1.0.0; escaping=allow-utf-8")[0],
}
EOF_ = b"# EOF\n"
encoders = pytest.mark.parametrize("encode", list(ENCODERS.values()), ids=list(ENCODERS))


def library_text(fam, encode=generate_latest) -> bytes:
    """The library's text of one family, less OpenMetrics' closing ``# EOF`` (the renderer ends the
    whole body with it)."""
    text = encode(One(fam))
    return text[:-len(EOF_)] if text.endswith(EOF_) else text


def scheduler_families(store: SchedulerStore) -> list:
    return list(SchedulerCollector(store, idle_after=None).collect())


def read_log(path) -> SchedulerStore:
    store = SchedulerStore(SchedulerStates())
    LogSource([str(path)], store, from_beginning=True).read_all()
    return store


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name)
def test_corpus_text_is_the_librarys(path):
    fams = scheduler_families(read_log(path))
    assert fams and all(isinstance(f, RawFamily) for f in fams)
    for encode in ENCODERS.values():
        cache = TextCache(encode)
        for fam in fams:
            assert cache.text(fam) == library_text(fam, encode), fam.name
        for fam in fams:  # again, every template from the cache
            assert cache.text(fam) == library_text(fam, encode), fam.name


def test_corpus_has_histograms_and_big_counts():
    """The corpus differential covers what matters: histogram families with series, and values the
    encoder writes with an exponent."""
    text = b"".join(library_text(f) for p in corpus_files() for f in scheduler_families(read_log(p)))
    assert re.search(rb"^sglang_scheduler_\w+_bucket\{", text, re.M)
    assert re.search(rb"^sglang_scheduler_\w+\{[^\n]*\} [0-9.]+e\+\d\d$", text, re.M)


def dp_state() -> tuple[SchedulerStore, LogSource, list[str]]:
    store = SchedulerStore(SchedulerStates())
    source = LogSource([], store)
    lines = _dp_lines(str(CORPUS / "008-retraction-storm-tokens-gained-uvicorn.log"), per_rank=400)
    source.ingest.feed(lines[: len(lines) // 2])
    return store, source, lines[len(lines) // 2:]


#: Accept headers: none (the text format), and what Prometheus sends (OpenMetrics first).
PROMETHEUS_ACCEPT = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75," \
                    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"


@pytest.mark.parametrize("accept", [None, PROMETHEUS_ACCEPT], ids=["text", "openmetrics"])
def test_eight_dp_ranks_every_rank_changed_body_is_the_librarys(accept):
    """The bench's state: every scrape after each DP rank printed one more line, the renderer's body
    equals the negotiated encoder's over the same registry (its volatile durations aside)."""
    store, source, rest = dp_state()
    registry = build_registry(store, source, 3600.0)
    renderer = Renderer(registry)
    encoder, want_type = choose_encoder(accept)
    assert len(store.states.schedulers) == 8
    bodies = set()
    for i in range(6):
        source.ingest.feed(rest[8 * i: 8 * i + 8])
        body, content_type = renderer.render(accept)
        assert content_type == want_type
        assert VOLATILE.sub(b"", body) == VOLATILE.sub(b"", encoder(registry))
        bodies.add(VOLATILE.sub(b"", body))
    assert renderer.renders == 6 and len(bodies) == 6  # each scrape rendered anew, each one changed
    assert re.search(rb'^sglang_scheduler_batch_size_bucket\{.*dp_rank="7"', body, re.M)


@pytest.mark.parametrize("accept", [None, PROMETHEUS_ACCEPT], ids=["text", "openmetrics"])
def test_changed_scheduler_families_skip_the_encoder_once_templates_are_cached(accept):
    """After the first render, a changed scheduler family is written from cached templates: the
    library's encoder sees it no more (only a series with a new label set is cut from the library's
    text), yet the body is the library's; a render with nothing changed in between (the families'
    texts reused whole) keeps the templates."""
    store, source, rest = dp_state()
    registry = build_registry(store, source, 3600.0)
    library, content_type = choose_encoder(accept)
    seen = []

    def encoder(reg):
        seen.extend(f.name for f in reg.collect())
        return library(reg)

    renderer = Renderer(registry)
    before = b"".join(renderer._encode(encoder, content_type))
    assert "sglang_scheduler_batch_size" in seen
    again = b"".join(renderer._encode(encoder, content_type))  # nothing changed: texts reused whole
    assert VOLATILE.sub(b"", again) == VOLATILE.sub(b"", before)
    seen.clear()
    source.ingest.feed(rest[:80])
    body = b"".join(renderer._encode(encoder, content_type))
    assert "sglang_scheduler_batch_size" not in seen and "sglang_exporter_log_lines" in seen
    assert batch_sizes(body) != batch_sizes(before)  # it did change
    assert VOLATILE.sub(b"", body) == VOLATILE.sub(b"", library(registry))


def batch_sizes(body: bytes) -> list[bytes]:
    return re.findall(rb"^sglang_scheduler_batch_size_\w+\{.*$", body, re.M)


def test_formats_in_turn_and_name_filter_are_the_librarys():
    """OpenMetrics, then the text format, then OpenMetrics again from one renderer (each switch
    derives that format's templates anew); ``name[]`` is the library's text encoder."""
    store, source, rest = dp_state()
    registry = build_registry(store, source, 3600.0)
    renderer = Renderer(registry)
    for i, accept in enumerate(["application/openmetrics-text; version=1.0.0", None, PROMETHEUS_ACCEPT]):
        source.ingest.feed(rest[8 * i: 8 * i + 8])
        body, content_type = renderer.render(accept)
        encoder, want_type = choose_encoder(accept)
        assert content_type == want_type
        assert VOLATILE.sub(b"", body) == VOLATILE.sub(b"", encoder(registry))
    assert body.endswith(b"# EOF\n") and body.count(b"# EOF") == 1
    names = ["sglang_scheduler_batch_size_bucket", "sglang_scheduler_retractions_total"]
    body, _ = renderer.render(names=names)
    assert body == generate_latest(registry.restricted_registry(names))
    assert b'sglang_scheduler_batch_size_bucket{' in body and b"_sum{" not in body


def test_escaping_variant_uses_its_own_encoder():
    store, source, _ = dp_state()
    registry = build_registry(store, source, 3600.0)
    accept = "text/plain; version=1.0.0; escaping=allow-utf-8"
    encoder, want_type = choose_encoder(accept)
    body, content_type = Renderer(registry).render(accept)
    assert content_type == want_type
    assert VOLATILE.sub(b"", body) == VOLATILE.sub(b"", encoder(registry))


def test_samples_are_the_library_familys_and_built_lazily():
    fam = RawFamily(partial(HistogramMetricFamily, "x_seconds", "h", labels=["a"]))
    lib = HistogramMetricFamily("x_seconds", "h", labels=["a"])
    assert not has_samples(fam)
    for f in (fam, lib):
        f.add_metric(["1"], [("0.5", 1), ("+Inf", 3)], 2.5)
    assert fam._samples is None and has_samples(fam)
    assert fam.samples == lib.samples and fam == lib
    with pytest.raises(TypeError, match="one value"):
        RawFamily(partial(GaugeMetricFamily, "g", "h", labels=[])).add_metric([], 1, 2)


def test_templates_of_gone_series_are_dropped_and_of_families_not_written_kept():
    cache = TextCache(generate_latest)
    other = RawFamily(partial(GaugeMetricFamily, "other", "h", labels=["dp"]))
    other.add_metric(["0"], 1)
    cache.text(other)
    for dp in ("0", "1", "1"):
        fam = RawFamily(partial(GaugeMetricFamily, "g", "h", labels=["dp"]))
        fam.add_metric([dp], 1)
        cache.text(fam)
    assert len(cache) == 2  # g's dp="1" and other's dp="0": written in no later render, kept


# --- generated values and labels ---

NUMBERS = [0, 1, 999_999, 1_000_000, 1_234_567, 10**16 + 1, 2**63, 0.0, -0.0, 0.1, 1e6, 1e21, 123456.789,
           1234567.5, 1e-7, 5e-324, 1.7976931348623157e308, -1e300, math.inf, -math.inf, math.nan, True, False]
LABELS = ["", "plain", 'quo"te', "back\\slash", "new\nline", "tab\tx", "ünïcödé ✓", "\\n literal", "sp ace", "}{,="]

counts = st.one_of(st.integers(0, 10**20), st.sampled_from(NUMBERS))
values = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**20, 10**20),
                   st.sampled_from(NUMBERS))
label = st.one_of(st.sampled_from(LABELS), st.text(max_size=6))
bounds = st.lists(st.floats(-1e9, 1e12, allow_nan=False), min_size=0, max_size=6, unique=True).map(sorted)


def both(kind, unit=""):
    """A :class:`RawFamily` and the library's family of one kind (with ``unit``: OpenMetrics writes
    a ``# UNIT`` line), both empty."""
    names = ["dp_rank", "phase"]
    cls = {"counter": CounterMetricFamily, "gauge": GaugeMetricFamily, "histogram": HistogramMetricFamily}[kind]
    name = f"sglang_fuzz_{kind}" + (f"_{unit}" if unit else "")
    make = partial(cls, name, 'help with "quotes", \\ and\nnewline ✓', labels=names, unit=unit)
    return RawFamily(make), make()


@encoders
@settings(max_examples=80, deadline=None)
@given(kind=st.sampled_from(["counter", "gauge"]), unit=st.sampled_from(["", "seconds"]),
       series=st.lists(st.tuples(label, label, values), max_size=6))
def test_counter_gauge_text_is_the_librarys(encode, kind, unit, series):
    fam, lib = both(kind, unit)
    for a, b, v in series:
        fam.add_metric([a, b], v)
        lib.add_metric([a, b], v)
    cache = TextCache(encode)
    assert cache.text(fam) == library_text(lib, encode)
    assert cache.text(fam) == library_text(lib, encode)  # templates from the cache


@encoders
@settings(max_examples=80, deadline=None)
@given(unit=st.sampled_from(["", "seconds"]),
       series=st.lists(st.tuples(label, bounds, st.lists(counts, min_size=7, max_size=7),
                                 st.one_of(st.none(), values)), max_size=4))
def test_histogram_text_is_the_librarys(encode, unit, series):
    fam, lib = both("histogram", unit)
    for a, bs, cs, total in series:
        buckets = [(repr(float(b)), c) for b, c in zip(bs, cs)] + [("+Inf", cs[-1])]
        fam.add_metric([a, "decode"], buckets, total)
        lib.add_metric([a, "decode"], buckets, total)
    cache = TextCache(encode)
    for _ in range(2):
        assert cache.text(fam) == library_text(lib, encode)


@encoders
def test_edge_values_one_by_one(encode):
    """Each edge number as a count, a sum and a gauge value; ints then floats of equal value in one
    render (the int memo must not hand 0's text to -0.0, nor 1's to True)."""
    cache = TextCache(encode)
    for n in NUMBERS:
        fam, lib = both("histogram")
        for f in (fam, lib):
            f.add_metric(["0", "prefill"], [("1.0", 0), ("2.0", n), ("+Inf", n)], n)
            f.add_metric(["1", "prefill"], [("1.0", -0.0), ("2.0", 0.0), ("+Inf", 0)], -0.0)
            f.add_metric(["2", "prefill"], [("1.0", 1), ("2.0", True), ("+Inf", 1)], 1)
        assert cache.text(fam) == library_text(lib, encode), n
        g, glib = both("gauge")
        g.add_metric(["0", LABELS[5]], n)
        glib.add_metric(["0", LABELS[5]], n)
        assert cache.text(g) == library_text(glib, encode), n
    g, _ = both("gauge")
    g.add_metric(["0", "x"], 1_234_567)
    assert cache.text(g).endswith(b'phase="x"} 1.234567e+06\n')  # Go's exponent, as the library writes it
    fam, lib = both("histogram")
    for f in (fam, lib):
        f.add_metric(["0", "x"], [("-1.0", 1), ("+Inf", 2)], 3.0)  # a negative bound: no _sum, _count
    assert cache.text(fam) == library_text(lib, encode) and b"_sum" not in cache.text(fam)


@encoders
def test_a_series_text_follows_its_counts_and_sum(encode):
    """Scrape after scrape on one series: ints, an equal float (-0.0 == 0), ints again, another sum
    (-0.0 after 0.0), a new count: every text the library's."""
    cache = TextCache(encode)
    steps = [([0, 1, 1], 0.0), ([-0.0, 1, 1], 0.0), ([0, 1, 1], 0.0), ([0, 1, 1], -0.0), ([0, 1, 2], -0.0),
             ([0, 1, 2], -0.0), ([0, 1.0, 2], -0.0), ([0, 1, 10**7], math.nan)]
    for cs, total in steps:
        fam, lib = both("histogram")
        for f in (fam, lib):
            f.add_metric(["0", "decode"], [("1.0", cs[0]), ("2.0", cs[1]), ("+Inf", cs[2])], total)
        assert cache.text(fam) == library_text(lib, encode), (cs, total)


def test_a_percent_sign_in_a_label_value_is_kept():
    """The histogram template is filled with ``bytes %``: a ``%`` of a label value stays itself."""
    for encode in ENCODERS.values():
        fam, lib = both("histogram")
        for f in (fam, lib):
            f.add_metric(["50%s", "%d%%"], [("1.0", 3), ("+Inf", 4)], 5.0)
        assert TextCache(encode).text(fam) == library_text(lib, encode)


@pytest.mark.parametrize("accept", [None, PROMETHEUS_ACCEPT], ids=["text", "openmetrics"])
def test_forward_pass_stream_families_are_the_librarys(accept):
    """The per-pass stream's collector (up to ~290 series per DP rank) takes the same fast path:
    scrape after scrape with every rank's histograms changed, the body is the library's."""
    from fpm_publisher import encode, forward_pass

    from exporter.sources.fpm.collector import FpmCollector
    from exporter.sources.fpm.decode import decode_frames
    from exporter.sources.fpm.stats import FpmStats

    stats = FpmStats(["tcp://127.0.0.1:1"], clock=lambda: 1.7e9, monotonic=lambda: 1000.0)  # fresh throughout
    registry = CollectorRegistry(auto_describe=False)
    registry.register(FpmCollector(stats))
    renderer = Renderer(registry)
    encoder, _ = choose_encoder(accept)
    seq = 0
    for scrape in range(4):
        for dp in range(4):
            seq += 1
            stats.apply(0, [decode_frames([b"", seq.to_bytes(8, "big"), encode(forward_pass(
                dp, prefill=scrape % 3, decode=dp + scrape, wall_time=0.001 * (seq % 7), queued_prefill=seq))])])
        body, _ = renderer.render(accept)
        assert body == encoder(registry)
    assert all(isinstance(f, RawFamily) for f in registry.collect())
    assert re.search(rb'^sglang_scheduler_\w+_bucket\{dp_rank="3"', body, re.M)
