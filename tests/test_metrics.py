"""The metric table (exporter/metrics): sound, the one source of describe() and collect(), of the
registry's names (``/metrics?name[]=``, duplicate registrations), of the docs, and of every metric
the rules and dashboards read. A row added to it appears everywhere without another edit."""

from __future__ import annotations

import importlib.util
import json
import urllib.request

import pytest
import yaml
from conftest import CORPUS, ROOT, samples, value
from exporter_support import Exporter
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.registry import DuplicateTimeseries
from rules_support import RULE_FILES, TARGET_LABELS, references

from exporter import metrics
from exporter.cli import build_registry
from exporter.metrics import COUNTER, HISTOGRAM, SCHEDULER_LABELS, MetricDef
from exporter.scheduler.collector import SchedulerCollector
from exporter.scheduler.state import SchedulerStates
from exporter.scheduler.store import SchedulerStore
from exporter.selfmetrics import GuardedCollectors
from exporter.sources.fpm.collector import FpmCollector
from exporter.sources.fpm.stats import FpmStats
from exporter.sources.gpu.collector import GpuCollector
from exporter.sources.log.source import LogSource
from exporter.web import WebServer, make_app

DASHBOARDS = sorted((ROOT / "grafana").glob("*.json"))
RICH = ("008-retraction-storm-tokens-gained-uvicorn.log", "024-dp-attention-mtp-dp-tp-tags.log",
        "028-pd-decode-prealloc-transfer-retracted-fields.log", "019-npu-mamba-usage-full-token-prefill-burst.log")


def registry_over(*names: str) -> tuple[CollectorRegistry, SchedulerStore, LogSource]:
    """The command's registry (without NVML) over real corpus logs read from their first line."""
    store = SchedulerStore(SchedulerStates())
    log = LogSource([str(CORPUS / n) for n in names], store, from_beginning=True)
    log.read_all()
    return build_registry(store, log, None), store, log


def described(collector) -> list[tuple[str, str, str]]:
    return [(f.name, f.type, f.documentation) for f in collector.describe()]


# ------------------------------------------------------------------------------ the table itself


def test_the_table_is_sound():
    assert metrics.check(metrics.TABLE) == []
    assert len(metrics.TABLE) == len({m.name for m in metrics.TABLE})


def test_the_soundness_check_catches_what_it_should():
    bad = (MetricDef("sglang_scheduler_x", COUNTER, SCHEDULER_LABELS, "events", "src", "help", "scheduler", "a"),
           MetricDef("sglang_gpu_y", HISTOGRAM, (), "s", "src", "help", "gpu", "b"),
           MetricDef("sglang_gpu_y", "summary", (), "s", "src", "help", "nowhere", "b"),
           MetricDef("sglang_scheduler_z", "gauge", ("pool",), "ratio", "", "help", "scheduler", "c"))
    problems = "\n".join(metrics.check(bad))
    for expected in ("sglang_scheduler_x: counters, and only counters, end in _total",
                     "sglang_gpu_y: histograms, and only histograms, have buckets", "sglang_gpu_y: declared twice",
                     "unknown type 'summary'", "unknown collector 'nowhere'",
                     "sglang_scheduler_z: scheduler metrics start with the labels", "sglang_scheduler_z: help, source"):
        assert expected in problems


def test_units_agree_with_the_names():
    """Prometheus naming: a base unit in the name is the row's unit, and the other way round."""
    units = ("seconds", "bytes", "ratio", "hertz", "watts", "celsius", "joules")
    for m in metrics.TABLE:
        if m.unit in units:
            assert f"_{m.unit}_" in m.name + "_", (m.name, m.unit)
        for unit in units:
            if m.name.removesuffix("_total").endswith("_" + unit):
                assert m.unit == unit, (m.name, m.unit)


def test_the_scheduler_state_takes_its_buckets_from_the_table():
    from exporter.scheduler import state

    assert state.BATCH_SIZE_BUCKETS == metrics.get("sglang_scheduler_batch_size").buckets
    assert state.ReplicaCounters().queue_wait.bounds == metrics.get("sglang_scheduler_queue_wait_seconds").buckets


# ------------------------------------------------------------------------------ describe and collect


def test_each_collector_describes_exactly_its_rows_and_collects_the_same_families():
    registry, store, log = registry_over(*RICH)
    guarded = next(iter(registry._collector_to_names))
    collectors = dict(guarded.collectors)
    for name, collector in (("scheduler", collectors["scheduler"]), ("log", collectors["log"]),
                            ("pipeline", collectors["pipeline"]),
                            ("gpu", GpuCollector(None)), ("fpm", FpmCollector(FpmStats(["ipc:///x.0"])))):
        want = [(m.family, m.type, m.help) for m in metrics.rows(name)]
        assert described(collector) == want, name
        assert all(not f.samples for f in collector.describe()), name
    collected = [(f.name, f.type, f.documentation) for f in collectors["scheduler"].collect()]
    assert collected == described(collectors["scheduler"])
    # without NVML, the stream and Omni's endpoints (one-shot): the scheduler's, the Omni pipeline's (from
    # the log), the log's and the self-metrics' families
    assert [f.name for f in guarded.describe()] == [m.family for m in metrics.TABLE if m.collector == "scheduler"] + [
        m.family for m in metrics.TABLE if m.collector == "pipeline"] + [
        m.family for m in metrics.TABLE if m.collector in ("log", "self")]


def test_the_registry_knows_every_name_and_filters_by_name():
    registry, _, _ = registry_over(*RICH)
    text = generate_latest(registry.restricted_registry(["sglang_exporter_build_info"])).decode()
    assert [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")] == ["sglang_exporter_build_info"]
    m = samples(generate_latest(registry.restricted_registry(
        ["sglang_scheduler_retractions_total", "sglang_scheduler_batch_size_bucket"])).decode())
    assert {name for name, _ in m} == {"sglang_scheduler_retractions_total", "sglang_scheduler_batch_size_bucket"}
    assert value(m, "sglang_scheduler_retractions_total", stage="", dp_rank="0") == 9


def test_a_duplicate_registration_fails_loudly():
    registry, store, _ = registry_over(RICH[0])
    with pytest.raises(DuplicateTimeseries):
        registry.register(SchedulerCollector(store))
    with pytest.raises(DuplicateTimeseries):  # inside the guard too, where the registry cannot see it
        GuardedCollectors([("a", SchedulerCollector(store)), ("b", SchedulerCollector(store))])
    with pytest.raises(DuplicateTimeseries):
        GuardedCollectors([("gpu", GpuCollector(None)), ("again", GpuCollector(None))])


def test_the_name_filter_through_a_real_scrape_of_the_running_command(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_text((CORPUS / RICH[0]).read_text(encoding="utf-8"))
    exp = Exporter("--log.path", str(log), "--log.from-beginning", "--gpu.enabled", "false")
    try:
        exp.wait_for(lambda m: value(m, "sglang_scheduler_retractions_total", stage="", dp_rank="0") == 9, "the log read")
        status, body = exp.get("/metrics?name[]=sglang_exporter_build_info")
        assert status == 200
        assert [line.split()[2] for line in body.splitlines() if line.startswith("# HELP")] == ["sglang_exporter_build_info"]
        status, body = exp.get("/metrics?name[]=sglang_scheduler_retractions_total&name[]=sglang_exporter_log_lines_total")
        m = samples(body)
        assert {name for name, _ in m} == {"sglang_scheduler_retractions_total", "sglang_exporter_log_lines_total"}
        assert value(m, "sglang_exporter_log_lines_total", kind="retraction", result="parsed") == 9
    finally:
        assert exp.terminate() == 0


# ------------------------------------------------------------------------------ the monitoring reads the table


def monitoring_expressions():
    """``(where, expr)`` of every rule of deploy/prometheus/*.yml and every panel query of grafana/*.json."""
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                yield f"{path.name}: {rule.get('record') or rule.get('alert')}", rule["expr"]

    def walk(node, where):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "expr" and isinstance(v, str):
                    yield where, v
                else:
                    yield from walk(v, where)
        elif isinstance(node, list):
            for v in node:
                yield from walk(v, where)

    for path in DASHBOARDS:
        yield from walk(json.loads(path.read_text()), path.name)


def not_in_table(where: str, expr: str, table=None) -> list[str]:
    """Metric names, and label names of matchers, that an expression reads and the table lacks
    (SGLang's own ``sglang:*`` names aside: they are not the exporter's)."""
    rows = {m.name: m for m in (metrics.TABLE if table is None else table)}
    for m in list(rows.values()):
        if m.type == HISTOGRAM:
            rows.update({m.name + s: m for s in ("_bucket", "_sum", "_count")})
    problems = []
    for name, matchers in references(expr):
        if name.startswith("sglang:"):
            continue  # SGLang's own metrics (tests/test_rules.py checks them against its releases)
        m = rows.get(name)
        if m is None:
            problems.append(f"{where}: {name} is not in the metric table")
            continue
        allowed = {*m.labels, *m.optional_labels, *TARGET_LABELS, *(("le",) if m.type == HISTOGRAM else ())}
        problems += [f"{where}: {name} has no label {label!r}" for label, _, _ in matchers if label not in allowed]
    return problems


def test_every_metric_the_rules_and_dashboards_read_is_in_the_table():
    exprs = list(monitoring_expressions())
    assert len(exprs) > 50 and any(w.endswith(".json") for w, _ in exprs)
    assert [p for where, expr in exprs for p in not_in_table(where, expr)] == []


def test_the_table_check_catches_a_renamed_metric_and_a_wrong_label():
    assert not_in_table("x", 'rate(sglang_scheduler_retraction_total{stage="", dp_rank="0"}[5m])') == [
        "x: sglang_scheduler_retraction_total is not in the metric table"]
    assert not_in_table("x", 'sglang_gpu_power_watts{gpu_index="0"}') == ["x: sglang_gpu_power_watts has no label 'gpu_index'"]
    assert not_in_table("x", 'sglang_gpu_power_watts{gpu_instance_id="1", namespace="a"}') == []


# ------------------------------------------------------------------------------ one edit: a row


def test_a_row_added_to_the_table_appears_everywhere_without_another_edit(monkeypatch):
    """A throwaway row for a value the scheduler state already keeps (Decode lines per replica): it
    shows in /metrics over real HTTP, in describe() and the name filter, in the docs, and the checks
    of rules and dashboards accept it. No collector, docs page or check was edited."""
    row = MetricDef("sglang_scheduler_decode_lines_total", COUNTER, SCHEDULER_LABELS, "lines",
                    "Decode batch lines", "Decode batch lines read (a throwaway row of this test).", "scheduler",
                    "counter.decode_lines")
    expr = 'rate(sglang_scheduler_decode_lines_total{stage="", dp_rank="0"}[5m])'
    assert not_in_table("rule", expr) != []
    monkeypatch.setattr(metrics, "TABLE", (*metrics.TABLE, row))
    assert metrics.check(metrics.TABLE) == []

    registry, _, _ = registry_over(RICH[0])
    server = WebServer("127.0.0.1", 0, make_app(registry))
    server.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=10) as r:
            body = r.read().decode()
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics?name[]={row.name}", timeout=10) as r:
            only = r.read().decode()
    finally:
        server.stop()
    assert value(samples(body), row.name, stage="", dp_rank="0") == 14  # corpus 008 has 14 Decode batch lines
    assert f"# HELP sglang_scheduler_decode_lines_total {row.help}" in body
    assert {name for name, _ in samples(only)} == {row.name}
    assert "sglang_scheduler_decode_lines" in [f.name for f in next(iter(registry._collector_to_names)).describe()]

    spec = importlib.util.spec_from_file_location("build_metrics_doc", ROOT / "scripts" / "build_metrics_doc.py")
    doc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(doc)
    assert "| `sglang_scheduler_decode_lines_total` | counter | `stage`, `dp_rank` | lines | Decode batch lines |" in doc.render()
    assert not_in_table("rule", expr) == []
