"""The report document: every section computed from one :class:`~exporter.report.basis.Basis`.

:func:`analyse` is the whole pipeline after reading: recorder -> basis -> one function per checklist
section (each in its own module, with its figures' domains) -> the document (a plain ``dict`` with
the stable keys of :data:`~exporter.report.schema.TOP_KEYS`), checked against its domains.
"""

from __future__ import annotations

from . import batch, header, kv, queue, retractions, scenario, startup, throughput
from .basis import basis
from .read import InputFile, Recorder
from .schema import SCHEMA, enforce


def analyse(rec: Recorder, inputs: list[InputFile], window: float = 10.0,
            model_config: dict | None = None, kv_bytes: float | None = None,
            expect: dict[str, str] | None = None, enforce_domains: bool = True) -> dict:
    """Turn a filled recorder into the report document (see :mod:`exporter.report.schema`).

    Args:
        rec: The recorder after :func:`~exporter.report.read.read_logs`.
        inputs: What :func:`~exporter.report.read.read_logs` returned.
        window: Seconds per window of the per-window retraction share.
        model_config: A parsed Hugging Face ``config.json`` for the per-token KV size, or None.
        kv_bytes: Bytes per KV element overriding the config's dtype (``fp8``: 1), or None.
        expect: Start-up parameters the server was launched with (``name -> value``).
        enforce_domains: Apply the last-resort domain guard (:func:`~exporter.report.schema.enforce`);
            off only in tests that check the sections keep their domains by themselves.

    Raises:
        ValueError: ``model_config`` lacks what the per-token KV size needs.
    """
    b = basis(rec, inputs)
    batch_size = batch.section(b)
    retraction = retractions.section(b, window)
    queue_latency = queue.section(b)
    kv_capacity = kv.section(b, model_config, kv_bytes, batch_size["decode"]["p99"])
    scene = scenario.section(b, batch_size, retraction)
    doc = {
        "schema": SCHEMA,
        "inputs": header.inputs(b),
        "lines": header.lines(b),
        "span": header.span(b),
        "schedulers": sorted(rec.states.schedulers),
        "settings": header.settings(b),
        "batch_size": batch_size,
        "retractions": retraction,
        "throughput": throughput.section(b),
        "kv_capacity": kv_capacity,
        "queue_latency": queue_latency,
        "scenario": scene,
        "checklist": scenario.checklist(b, window, scene, retraction, kv_capacity, queue_latency),
        "startup": startup.section(b, expect),
        "timeline": header.timeline(b),
    }
    if enforce_domains:
        enforce(doc)
    return doc
