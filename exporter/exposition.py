"""The ``/metrics`` body: prometheus_client's own encoders, one render at a time, unchanged families
not encoded again.

:class:`Renderer` keeps what the library's WSGI app does (content negotiation between the text
format and OpenMetrics, the ``name[]`` filter, gzip) and adds three things a sidecar with many series
needs:

* **Text of unchanged families is reused.** The encoders write each family on its own, so the body
  is the families' texts joined. A collector that knows nothing changed since the last scrape yields
  the very same family objects again (the scheduler collector does, while its store's generation and
  the schedulers' idle freshness are unchanged); a family equal to the previous render's of its name
  (samples compared, values bit for bit) is as good. Their text is taken from the previous render
  instead of being encoded again (about 5 µs per series; comparing costs a small fraction of that).
* **Changed scheduler families are written from cached templates,** in the text format and in
  OpenMetrics alike (Prometheus negotiates OpenMetrics). On a busy server every DP rank's
  histograms change between scrapes, so the above does not help there. The scheduler collector's
  families are :class:`~exporter.metrics.text.RawFamily` (series kept raw, the library's samples built
  only when read); their lines are the library's own output for each series with the values cut
  out, derived once and kept across renders, filled with ``floatToGoString`` of the values
  (:class:`~exporter.metrics.text.TextCache`, one format's at a time), so the bytes are the library's
  (``tests/test_text.py``). ``name[]`` uses the library's encoder over the samples.
* **What a render holds is bounded by one body.** A family's text is kept as pieces, the previous
  render's pieces are let go family by family as the render goes, and the body is never joined for
  HTTP: :meth:`Renderer.render_parts` hands out the pieces themselves, which the response sends in
  chunks (:func:`exporter.web.make_app`), so concurrent scrapes share the texts instead of each
  holding a body, a compressed body and waitress's copy of it (docs/performance.md, memory).
* **Renders are bounded.** One render runs at a time; a scrape that arrives while another renders
  waits, then takes the body of the next render if that one started after it arrived (so it is
  never older than the scrape), and renders itself otherwise. A storm of concurrent scrapes costs a
  few renders, whatever their number, and never more than one core: the log reader keeps its share
  of the process (``tests/test_exposition.py``).
"""

from __future__ import annotations

import threading
import time
from array import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from operator import attrgetter

from prometheus_client.core import Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from .metrics.text import One as _One
from .metrics.text import RawFamily, TextCache

_EOF = b"# EOF\n"  # OpenMetrics ends the whole body with it, not each family
_VALUE = attrgetter("value")


class Renderer:
    """Renders a registry's exposition for HTTP scrapes (see the module docstring).

    Args:
        registry: What to render (its ``collect()`` and ``restricted_registry()``).
        clock: Monotonic clock in seconds (a scrape's arrival and a render's start).
        fast_text: Write :class:`~exporter.metrics.text.RawFamily` families from cached line templates
            (:class:`~exporter.metrics.text.TextCache`, text format and OpenMetrics); ``False`` hands
            them to the library's encoder like every other family.

    Attributes:
        renders: Renders done (tests count them).
    """

    def __init__(self, registry: Collector, clock: Callable[[], float] = time.monotonic, fast_text: bool = True):
        self.registry = registry
        self.clock = clock
        self.fast_text = fast_text
        self.renders = 0
        self._lock = threading.Lock()
        self._waiting = 0  # scrapes inside render(), the one rendering included
        self._count_lock = threading.Lock()
        self._texts: dict[tuple[str, str], tuple[Metric, list[bytes], bytes]] = {}  # by (content type, name)
        self._latest: dict[str, tuple[float, bytes]] = {}
        self._fast: tuple[str, TextCache] | None = None  # the last content type's

    def render(self, accept: str | None = None, names: list[str] | None = None,
               arrived: float | None = None) -> tuple[bytes, str]:
        """The body and its content type for one scrape: :meth:`render_parts` joined."""
        parts, content_type = self.render_parts(accept, names, arrived)
        return b"".join(parts), content_type

    def render_parts(self, accept: str | None = None, names: list[str] | None = None,
                     arrived: float | None = None) -> tuple[list[bytes], str]:
        """The body as the pieces that join to it, and its content type, for one scrape.

        The pieces are the families' texts kept for the next render (no copy of the body is made):
        a response sent from them piece by piece holds no body of its own (:func:`exporter.web.make_app`).

        Args:
            accept: The request's ``Accept`` header (OpenMetrics or the text format).
            names: The ``name[]`` query values: only these families (rendered apart, uncached).
            arrived: When the scrape arrived (``clock``); a render that started since then serves it.

        Returns:
            ``(pieces, content_type)``.
        """
        if arrived is None:
            arrived = self.clock()
        encoder, content_type = choose_encoder(accept or "")
        with self._count():
            with self._lock:
                if names:
                    return [encoder(_Restricted(self.registry, names))], content_type
                latest = self._latest.get(content_type)
                if latest is not None and latest[0] >= arrived:
                    return latest[1], content_type
                started = self.clock()
                parts = self._encode(encoder, content_type)
                # Kept only for scrapes already waiting (the pieces are the texts kept anyway, but a
                # later render replaces some of them, and then both would be held).
                self._latest = {content_type: (started, parts)} if self._waiting > 1 else {}
                self.renders += 1
                return parts, content_type

    @contextmanager
    def _count(self) -> Iterator[None]:
        """Counts a scrape in :attr:`_waiting` while it is inside :meth:`render`."""
        with self._count_lock:
            self._waiting += 1
        try:
            yield
        finally:
            with self._count_lock:
                self._waiting -= 1

    def _encode(self, encoder: Callable[[Collector], bytes], content_type: str) -> list[bytes]:
        """The registry's families encoded one by one, as the pieces of the body, reusing the text of
        families seen before: the same object, or a family equal to the one the text was encoded
        from (:func:`_same`)."""
        texts = {}
        parts: list[bytes] = []
        previous, self._texts = self._texts, {}  # popped as the render goes: old texts freed early
        if previous and next(iter(previous))[0] != content_type:
            previous = {}  # another format's texts: none is of use, let them go before this render
        fast = None
        if self.fast_text:
            if self._fast is None or self._fast[0] != content_type:  # one format's prefixes at a time
                self._fast = (content_type, TextCache(encoder))
            fast = self._fast[1]
        for family in self.registry.collect():
            key = (content_type, family.name)
            held = previous.pop(key, None)
            if held is not None and held[0] is family:
                text, bits = held[1], held[2]
            elif fast is not None and isinstance(family, RawFamily):
                text, bits = fast.parts(family), b""
            else:
                bits = _value_bits(family)
                if held is not None and _same(held[0], held[2], family, bits):
                    text = held[1]
                else:
                    one = encoder(_One(family))
                    text = [one[:-len(_EOF)] if one.endswith(_EOF) else one]
            texts[key] = (family, text, bits)
            parts.extend(text)
        self._texts = texts
        if content_type.startswith("application/openmetrics-text"):
            parts.append(_EOF)
        return parts


class _Restricted:
    """The ``name[]`` filter, as prometheus_client's ``restricted_registry`` applies it (samples whose
    name is asked for), without reading the samples of a family that cannot have one: the library's
    filter reads every family's samples, which builds the library's sample objects of every
    :class:`~exporter.metrics.text.RawFamily` (42 MiB at 136,000 series) to keep a few."""

    __slots__ = ("registry", "names")

    def __init__(self, registry: Collector, names: list[str]):
        self.registry, self.names = registry, set(names)

    def collect(self) -> Iterator[Metric]:
        for family in self.registry.collect():
            if any(n.startswith(family.name) for n in self.names):  # its sample names all start so
                restricted = family._restricted_metric(self.names)
                if restricted:
                    yield restricted


def _value_bits(family: Metric) -> bytes:
    """The family's sample values as the bytes of doubles: equal bytes encode to equal text (``==``
    alone would take -0.0 for 0.0, which the encoders write apart)."""
    return array("d", map(_VALUE, family.samples)).tobytes()


def _same(old: Metric, old_bits: bytes, new: Metric, new_bits: bytes) -> bool:
    """Whether ``new`` encodes to the text of ``old``: the same name, help, type, unit and samples
    (names, labels, timestamps, exemplars), and values equal bit for bit."""
    return (new_bits == old_bits and new.samples == old.samples and new.type == old.type
            and new.documentation == old.documentation and new.unit == old.unit)
