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
* **Changed scheduler families are written from cached prefixes.** On a busy server every DP rank's
  histograms change between scrapes, so the above does not help there. The scheduler collector's
  families are :class:`~exporter.metrics.text.RawFamily` (series kept raw, the library's samples built
  only when read); in the text format their lines are ``prefix + floatToGoString(value)`` with the
  prefixes cut once from the library's own output and kept across renders
  (:class:`~exporter.metrics.text.TextCache`), so the bytes are the library's
  (``tests/test_text.py``). OpenMetrics and ``name[]`` use the library's encoders over the samples.
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
from collections.abc import Callable
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
        fast_text: Write :class:`~exporter.metrics.text.RawFamily` families of the text format from
            cached line prefixes (:class:`~exporter.metrics.text.TextCache`); ``False`` hands them to
            the library's encoder like every other family (``bench/render.py``'s "before").

    Attributes:
        renders: Renders done (tests count them).
    """

    def __init__(self, registry: Collector, clock: Callable[[], float] = time.monotonic, fast_text: bool = True):
        self.registry = registry
        self.clock = clock
        self.fast_text = fast_text
        self.renders = 0
        self._lock = threading.Lock()
        self._texts: dict[tuple[str, str], tuple[Metric, bytes, bytes]] = {}  # by (content type, name)
        self._latest: dict[str, tuple[float, bytes]] = {}
        self._fast: dict[str, TextCache] = {}  # by text-format content type

    def render(self, accept: str | None = None, names: list[str] | None = None,
               arrived: float | None = None) -> tuple[bytes, str]:
        """The body and its content type for one scrape.

        Args:
            accept: The request's ``Accept`` header (OpenMetrics or the text format).
            names: The ``name[]`` query values: only these families (rendered apart, uncached).
            arrived: When the scrape arrived (``clock``); a render that started since then serves it.

        Returns:
            ``(body, content_type)``.
        """
        if arrived is None:
            arrived = self.clock()
        encoder, content_type = choose_encoder(accept or "")
        with self._lock:
            if names:
                return encoder(self.registry.restricted_registry(names)), content_type
            latest = self._latest.get(content_type)
            if latest is not None and latest[0] >= arrived:
                return latest[1], content_type
            started = self.clock()
            body = self._encode(encoder, content_type)
            self._latest = {content_type: (started, body)}
            self.renders += 1
            return body, content_type

    def _encode(self, encoder: Callable[[Collector], bytes], content_type: str) -> bytes:
        """The registry's families encoded one by one, reusing the text of families seen before: the
        same object, or a family equal to the one the text was encoded from (:func:`_same`)."""
        texts = {}
        parts = []
        previous = self._texts
        fast = None
        if self.fast_text and content_type.startswith("text/plain"):
            fast = self._fast.get(content_type)
            if fast is None:
                fast = self._fast[content_type] = TextCache(encoder)
        for family in self.registry.collect():
            key = (content_type, family.name)
            held = previous.get(key)
            if held is not None and held[0] is family:
                text, bits = held[1], held[2]
            elif fast is not None and isinstance(family, RawFamily):
                text, bits = fast.text(family), b""
            else:
                bits = _value_bits(family)
                if held is not None and _same(held[0], held[2], family, bits):
                    text = held[1]
                else:
                    text = encoder(_One(family))
                    if text.endswith(_EOF):
                        text = text[:-len(_EOF)]
            texts[key] = (family, text, bits)
            parts.append(text)
        self._texts = texts
        if fast is not None:
            fast.end()
        if content_type.startswith("application/openmetrics-text"):
            parts.append(_EOF)
        return b"".join(parts)


def _value_bits(family: Metric) -> bytes:
    """The family's sample values as the bytes of doubles: equal bytes encode to equal text (``==``
    alone would take -0.0 for 0.0, which the encoders write apart)."""
    return array("d", map(_VALUE, family.samples)).tobytes()


def _same(old: Metric, old_bits: bytes, new: Metric, new_bits: bytes) -> bool:
    """Whether ``new`` encodes to the text of ``old``: the same name, help, type, unit and samples
    (names, labels, timestamps, exemplars), and values equal bit for bit."""
    return (new_bits == old_bits and new.samples == old.samples and new.type == old.type
            and new.documentation == old.documentation and new.unit == old.unit)
