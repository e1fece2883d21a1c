"""The report document: every section computed from one :class:`~exporter.report.basis.Basis`.

:func:`analyse` is the whole pipeline after reading: recorder -> basis -> one function per checklist
section (each in its own module, with its figures' domains) -> the document (a plain ``dict`` with
the stable keys of :data:`~exporter.report.schema.TOP_KEYS`), checked against its domains. An SGLang
Omni log gets one such document per stage under ``stages`` (the top level then holds only plain
SGLang's schedulers, usually none), so that two stages are never one story.
"""

from __future__ import annotations

from . import batch, classes, header, kv, queue, ranks, retractions, scenario, startup, starts, throughput
from .basis import basis
from .files import InputFile
from .read import Recorder
from .schema import SCHEMA, enforce


def analyse(rec: Recorder, inputs: list[InputFile], window: float = 10.0,
            model_config: dict | None = None, kv_bytes: float | None = None,
            expect: dict[str, str] | None = None, enforce_domains: bool = True) -> dict:
    """Turn a filled recorder into the report document (see :mod:`exporter.report.schema`).

    Args:
        rec: The recorder after :func:`~exporter.report.files.read_logs`.
        inputs: What :func:`~exporter.report.files.read_logs` returned.
        window: Seconds per window of the per-window retraction share.
        model_config: A parsed Hugging Face ``config.json`` for the per-token KV size, or None.
        kv_bytes: Bytes per KV element overriding the config's dtype (``fp8``: 1), or None.
        expect: Start-up parameters the server was launched with (``name -> value``).
        enforce_domains: Apply the last-resort domain guard (:func:`~exporter.report.schema.enforce`);
            off only in tests that check the sections keep their domains by themselves.

    Raises:
        ValueError: ``model_config`` lacks what the per-token KV size needs.
    """
    doc = _analyse(rec.stage_view(""), inputs, window, model_config, kv_bytes, expect, enforce_domains)
    doc["lines"]["unattributed"] = {k: n for (k, result), n in sorted(rec.lines.items()) if result == "unattributed" and n}
    # why, as the attribution found it (one stage unnamed, several stages, a doubtful start-up line)
    doc["lines"]["unattributed_reasons"] = [text.split(". Put ")[0] for text in rec.attribution_reasons]
    doc["stages"] = {}
    for stage in rec.stages:
        sub = _analyse(rec.stage_view(stage), inputs, window, model_config, kv_bytes, expect, enforce_domains)
        del sub["stages"]
        doc["stages"][stage] = sub
    return doc


def _analyse(rec: Recorder, inputs: list[InputFile], window: float, model_config: dict | None,
             kv_bytes: float | None, expect: dict[str, str] | None, enforce_domains: bool) -> dict:
    """The document of one stage's view of the recorder (plain SGLang: stage ``""``)."""
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
        "schedulers": [dp for _, dp in sorted(rec.states.schedulers)],
        "settings": header.settings(b),
        "batch_size": batch_size,
        "retractions": retraction,
        "throughput": throughput.section(b),
        "kv_capacity": kv_capacity,
        "queue_latency": queue_latency,
        "dp_balance": ranks.section(b),
        "priority_classes": classes.section(b),
        "scenario": scene,
        "checklist": scenario.checklist(b, window, scene, retraction, kv_capacity, queue_latency),
        "startup": startup.section(b, expect),
        "starts": starts.section(b),
        "timeline": header.timeline(b),
        "stages": {},
    }
    if enforce_domains:
        enforce(doc)
    return doc
