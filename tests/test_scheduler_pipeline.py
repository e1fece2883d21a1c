"""exporter/scheduler/pipeline.py and its collector: SGLang Omni's pipeline facts from the log."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from conftest import CORPUS, samples, value
from exporter.scheduler.collector import PipelineCollector
from exporter.scheduler.pipeline import MAX_STAGES
from exporter.scheduler.state import SchedulerStates
from exporter.scheduler.store import SchedulerStore
from exporter.sources.log.ingest import Ingest

T = "2026-08-20 10:15:01,902"


def scrape(store: SchedulerStore) -> dict:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PipelineCollector(store))
    return samples(generate_latest(registry).decode())


def feed(*lines: str) -> tuple[SchedulerStore, Ingest]:
    store = SchedulerStore(SchedulerStates(40))
    ingest = Ingest(store)
    ingest.feed(list(lines))
    return store, ingest


def test_plain_sglang_has_no_pipeline_series():
    store, _ = feed("[2026-07-21 10:00:00] Decode batch, #running-req: 4, #token: 90, token usage: 0.01, #queue-req: 0",
                    "[2025-05-15 11:59:26 TP0] KV Cache is allocated. #tokens: 334289, K size: 24.23 GB, V size: 24.23 GB")
    assert scrape(store) == {}


def test_admissions_rejections_lifecycle_cap_and_the_ceiling_proxy():
    store, ingest = feed(
        f"{T} [INFO] [stage-thinker/MainThread] sglang.srt.model_executor.model_runner_components.cuda_graph_setup: "
        "Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, bs=[1, 2, 4, 8, 64], avail mem=3 GB",
        f"{T} [INFO] [MainProcess/MainThread] sglang_omni.pipeline.mp_runner: Coordinator in-flight cap=48 (generation "
        "running+queued)",
        f"{T} [INFO] [stage-thinker/MainThread] sglang_omni.pipeline.stage.runtime: Stage thinker started",
        f"{T} [INFO] [stage-code2wav/MainThread] sglang_omni.pipeline.stage.runtime: Stage code2wav started",
        *[f"{T} [INFO] [MainProcess/MainThread] sglang_omni.pipeline.coordinator: Coordinator submitted req=r{i} to "
          f"preprocessing at ipc:///x bindings={{}}" for i in range(5)],
        f"{T} [INFO] [MainProcess/MainThread] sglang_omni.pipeline.coordinator: Coordinator aborted req=r1",
        f"{T} [WARNING] [MainProcess/MainThread] sglang_omni.pipeline.coordinator: Rejecting request r9 before pipeline "
        "submit: in-flight cap (max_in_flight=48)",
        f"{T} [WARNING] [stage-thinker/scheduler-thinker] sglang_omni.scheduling.omni_scheduler: Rejecting request r8 "
        "before scheduling: Request requires more tokens than the thinker KV cache can hold (input_tokens=1, "
        "max_new_tokens=2, required_tokens=3, kv_capacity=2).",
        f"{T} [ERROR] [stage-code2wav/scheduler-code2wav] sglang_omni.pipeline.stage.runtime: Scheduler thread for "
        "stage code2wav crashed",
        f"{T} [ERROR] [MainProcess/MainThread] sglang_omni.pipeline.mp_runner: Dead stage process(es) detected: "
        "code2wav (pid=7, exit=1)")
    m = scrape(store)
    assert value(m, "sglang_omni_requests_submitted_total") == 5
    assert value(m, "sglang_omni_requests_aborted_total") == 1
    assert value(m, "sglang_omni_requests_rejected_total", stage="", reason="in_flight_cap") == 1
    assert value(m, "sglang_omni_requests_rejected_total", stage="thinker", reason="kv_capacity") == 1
    assert value(m, "sglang_omni_requests_rejected_total", stage="", reason="queue_full") == 0  # exists at 0
    assert value(m, "sglang_omni_in_flight_cap_requests") == 48
    assert value(m, "sglang_omni_stage_started", stage="thinker") == 1
    assert value(m, "sglang_omni_stage_started", stage="code2wav") == 0
    assert value(m, "sglang_omni_stage_lifecycle_events_total", stage="code2wav", event="crashed") == 1
    assert value(m, "sglang_omni_stage_lifecycle_events_total", stage="thinker", event="crashed") == 0
    assert value(m, "sglang_omni_stage_process_deaths_total") == 1
    assert value(m, "sglang_omni_stage_max_running_requests_proxy", stage="thinker") == 64
    assert ingest.stats.lines[("omni", "parsed")] == 14


def test_stage_names_from_the_log_cannot_grow_the_series_without_bound():
    lines = [f"{T} [INFO] [stage-s{i}/MainThread] sglang_omni.pipeline.stage.runtime: Stage s{i} started"
             for i in range(MAX_STAGES + 10)]
    store, ingest = feed(*lines)
    m = scrape(store)
    assert len({dict(k[1])["stage"] for k in m if k[0] == "sglang_omni_stage_started"}) == MAX_STAGES
    assert ingest.stats.lines[("omni", "malformed")] == 10


def test_submitted_is_absent_where_the_log_level_hides_it():
    """Issue 34 item 5: a real SGLang Omni 0.1.9 pipeline at INFO (corpus 064) admitted requests on
    both stages, but 'Coordinator submitted' is DEBUG there: no series, never a 0."""
    store, _ = feed(*(CORPUS / "064-real-omni-0.1.9-shim-two-stages.log").read_text().splitlines())
    m = scrape(store)
    assert value(m, "sglang_omni_stage_lifecycle_events_total", stage="thinker", event="started") == 1
    assert not any(name == "sglang_omni_requests_submitted_total" for name, _ in m)
    store, _ = feed("2026-08-20 10:15:01,311 [INFO] sglang_omni.pipeline.coordinator: Coordinator submitted "
                    "req=chatcmpl-7f3a9c to preprocessing at ipc:///tmp/sglang_omni/qwen3_omni/stage_preprocessing.sock")
    assert value(scrape(store), "sglang_omni_requests_submitted_total") == 1
