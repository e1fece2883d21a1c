"""The fleet path (issue 36): Prometheus agents scrape the sidecars and remote-write into a central
store that evaluates the shipped rules, as large users run it; the central store's recorded figures and
alerts are the single Prometheus's.

Three real sidecars (``python -m exporter``) each follow a temporary log into which real corpus lines
are written in two steps (step 1 up to the first Decode batch line, so that every counter and bucket
has a stored first sample; step 2 the rest):

* pod ``steady``: the test bed's real SGLang 0.5.23 log (corpus 060): no alert.
* pod ``kv-full``: an SWA server whose full pool is at 100% (corpus 006): ``SGLangKVCacheSaturated``.
* pod ``storm``: the 2026-09-13 server's capacity line (corpus 009, max_running_requests 2048) and its
  retraction storm (corpus 008): mean KV occupancy 0.91 with a decode batch p50 far below half the
  ceiling: ``SGLangBatchBoundByKV`` (read from the served batch-size buckets).

A Prometheus in agent mode (``--enable-feature=agent``) scrapes them with the shipped PodMonitor's
limits (``sampleLimit``, ``labelLimit``, ``labelValueLengthLimit``) and remote-writes into a central
Prometheus (``--web.enable-remote-write-receiver``) that loads the shipped rule files; a single
Prometheus scrapes the same sidecars with the same settings and rules. Every ratio, mean, quantile
and maximum the rules record, and the set of alerts (pending: every ``for:`` is 5 minutes or more),
must be the same in both (to 1e-3: the two scrape at their own instants, see ``_same``). Scrapes run
every second instead of the PodMonitor's 15 s so that the test takes under two minutes. Every wait polls with a deadline; only 127.0.0.1 is used.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
import yaml
from conftest import CORPUS, ROOT, require_tool, samples
from exporter_support import one_shot_run
from prometheus_support import Prometheus, free_port, get, log_lines, stop, wait_for
from rules_support import RULE_FILES

PODMONITOR = ROOT / "deploy" / "kubernetes" / "scrape" / "podmonitor.yaml"
DEADLINE_S = 90.0


def _pods() -> dict[str, tuple[list[str], list[str]]]:
    """pod -> (step 1 lines, step 2 lines)."""
    capacity = [line for line in log_lines(next(CORPUS.glob("009-*.log"))) if "max_total_num_tokens=" in line]
    logs = {"steady": log_lines(next(CORPUS.glob("060-*.log"))),
            "kv-full": log_lines(next(CORPUS.glob("006-*.log"))),
            "storm": capacity + log_lines(next(CORPUS.glob("008-*.log")))}
    out = {}
    for pod, lines in logs.items():
        first = next(i for i, line in enumerate(lines) if "Decode batch" in line)
        out[pod] = (lines[:first + 1], lines[first + 1:])
    return out


def _one_shot_batches(path) -> float:
    """sum(sglang_scheduler_batches_total) of the whole log, by the command's one-shot mode."""
    code, text = one_shot_run(path)
    assert code == 0
    return _batches(text)


def _batches(text: str) -> float:
    return sum(v for (n, _), v in samples(text).items() if n == "sglang_scheduler_batches_total")


def _scrape_limits() -> dict:
    """The shipped PodMonitor's guard rails as Prometheus scrape settings."""
    spec = yaml.safe_load(PODMONITOR.read_text())["spec"]
    return {"sample_limit": spec["sampleLimit"], "label_limit": spec["labelLimit"],
            "label_value_length_limit": spec["labelValueLengthLimit"]}


def _record_names() -> list[str]:
    """The recorded figures that do not depend on when a target was scraped: ratios, means,
    quantiles and maxima (a rate's value depends on the scrape times, which differ between two
    Prometheus servers scraping the same target)."""
    names = set()
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                name = rule.get("record", "")
                if any(k in name for k in (":ratio_rate", ":mean_rate", ":histogram_quantile_rate")) or name.endswith(":max"):
                    names.add(name)
    return sorted(names)


def _figures(prom: Prometheus, names: list[str]) -> dict:
    out = {}
    for name in names:
        for r in prom.query(name):
            labels = tuple(sorted(r["metric"].items()))
            out[labels] = float(r["value"][1])
    return out


def _same(a: dict, b: dict) -> bool:
    """The same series with the same values, to 1e-3: the agent and the single Prometheus scrape at
    their own instants, and rate() extrapolates a counter to its window's start by the average interval
    between its samples and by how far the counter is from zero (a retraction counter at 0 in step 1 is
    not extrapolated, the batch counter is), so a ratio of two rates differs in the fifth digit between
    two scrapers of the same target (1e-5 seen), never more."""
    return a.keys() == b.keys() and all(
        (math.isnan(a[k]) and math.isnan(b[k])) or math.isclose(a[k], b[k], rel_tol=1e-3, abs_tol=1e-12) for k in a)


def _differences(a: dict, b: dict) -> list:
    """What differs between two sets of figures (for the failure message)."""
    out = [("only central", k) for k in a.keys() - b.keys()] + [("only single", k) for k in b.keys() - a.keys()]
    return out + [(k, a[k], b[k]) for k in a.keys() & b.keys() if not _same({k: a[k]}, {k: b[k]})]


def _alerts(prom: Prometheus) -> set[tuple[str, str, str]]:
    return {(r["metric"]["alertname"], r["metric"].get("sglang_group") or r["metric"].get("pod", ""),
             r["metric"].get("dp_rank", "")) for r in prom.query("ALERTS")}


@pytest.fixture
def fleet(tmp_path):
    prometheus_bin = require_tool("prometheus")
    pods = _pods()
    procs, outputs = [], []

    def start(args: list[str], name: str) -> subprocess.Popen:
        out = (tmp_path / f"{name}.out").open("w")
        outputs.append(out)
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path)
        procs.append(proc)
        return proc

    sidecars = {}
    try:
        for pod in pods:
            log, port = tmp_path / f"{pod}.log", free_port()
            log.touch()
            start([sys.executable, "-m", "exporter", "--log.path", str(log), "--web.listen-address",
                   f"127.0.0.1:{port}", "--log.from-beginning", "--log.poll-interval", "0.2", "--gpu.enabled", "false"],
                  f"sidecar-{pod}")
            sidecars[pod] = {"log": log, "url": f"http://127.0.0.1:{port}/metrics", "port": port}
        scrape = {"job_name": "sglang-exporter", **_scrape_limits(),
                  "static_configs": [{"targets": [f"127.0.0.1:{s['port']}"], "labels": {"namespace": "llm", "pod": pod}}
                                     for pod, s in sidecars.items()]}
        glob = {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"}
        central_port, agent_port, single_port = free_port(), free_port(), free_port()
        configs = {
            "central": {"global": glob, "rule_files": [str(p) for p in RULE_FILES]},
            "agent": {"global": glob, "scrape_configs": [scrape], "remote_write": [{
                "url": f"http://127.0.0.1:{central_port}/api/v1/write",
                "queue_config": {"batch_send_deadline": "1s", "min_backoff": "100ms", "max_backoff": "1s"}}]},
            "single": {"global": glob, "rule_files": [str(p) for p in RULE_FILES], "scrape_configs": [scrape]},
        }
        for name, config in configs.items():
            (tmp_path / f"{name}.yml").write_text(json.dumps(config))  # JSON is YAML
        start([prometheus_bin, f"--config.file={tmp_path / 'central.yml'}", f"--storage.tsdb.path={tmp_path / 'central'}",
               f"--web.listen-address=127.0.0.1:{central_port}", "--web.enable-remote-write-receiver", "--log.level=warn"],
              "central")
        start([prometheus_bin, "--enable-feature=agent", f"--config.file={tmp_path / 'agent.yml'}",
               f"--storage.agent.path={tmp_path / 'agent'}", f"--web.listen-address=127.0.0.1:{agent_port}",
               "--log.level=warn"], "agent")
        start([prometheus_bin, f"--config.file={tmp_path / 'single.yml'}", f"--storage.tsdb.path={tmp_path / 'single'}",
               f"--web.listen-address=127.0.0.1:{single_port}", "--log.level=warn"], "single")
        yield {"pods": pods, "sidecars": sidecars, "procs": procs, "tmp": tmp_path,
               "central": Prometheus(f"http://127.0.0.1:{central_port}"),
               "single": Prometheus(f"http://127.0.0.1:{single_port}"),
               "agent": Prometheus(f"http://127.0.0.1:{agent_port}")}
    finally:
        for p in procs:
            stop(p)
        for out in outputs:
            out.close()


def test_agent_remote_write_central_store_matches_a_single_prometheus(fleet):
    pods, sidecars, procs = fleet["pods"], fleet["sidecars"], fleet["procs"]
    central, single = fleet["central"], fleet["single"]
    stores = {"central": central, "single": single}

    def stored(prom: Prometheus) -> dict[str, float]:
        return {r["metric"]["pod"]: float(r["value"][1])
                for r in prom.query('sum by (pod) (sglang_scheduler_batches_total{job="sglang-exporter"})')}

    # Step 1: each sidecar reads up to its first Decode batch line; both stores keep those first samples.
    for pod, (first, _) in pods.items():
        with sidecars[pod]["log"].open("a") as f:
            f.writelines(first)
    step1 = {pod: wait_for(f"{pod}'s sidecar to read step 1", lambda s=s: _batches(get(s["url"])), procs=procs)
             for pod, s in sidecars.items()}
    for name, prom in stores.items():
        wait_for(f"the {name} store to hold step 1 of every pod", lambda p=prom: stored(p) == step1,
                 DEADLINE_S, procs)
    # The agent keeps no local query storage; its scrapes stayed within the shipped sample limit.
    limit = _scrape_limits()["sample_limit"]
    scraped = {r["metric"]["pod"]: float(r["value"][1]) for r in single.query("scrape_samples_scraped")}
    assert scraped.keys() == set(pods) and all(0 < n <= limit / 2 for n in scraped.values()), scraped
    assert {r["metric"]["pod"] for r in central.query('up{job="sglang-exporter"} == 1')} == set(pods)

    # Step 2: the rest of each log; both stores receive the final counters.
    final = {}
    for pod, (first, rest) in pods.items():
        whole = fleet["tmp"] / f"{pod}-whole.log"
        whole.write_text("".join(first + rest))
        final[pod] = _one_shot_batches(whole)
        with sidecars[pod]["log"].open("a") as f:
            f.writelines(rest)
    for pod, s in sidecars.items():
        wait_for(f"{pod}'s sidecar to read step 2", lambda s=s, pod=pod: _batches(get(s["url"])) == final[pod], procs=procs)
    for name, prom in stores.items():
        wait_for(f"the {name} store to hold step 2 of every pod", lambda p=prom: stored(p) == final, DEADLINE_S, procs)

    # The shipped rules give the same figures in the central store as in the single Prometheus, and
    # the same alerts for the same pods.
    names = _record_names()
    expected_alerts = {("SGLangKVCacheSaturated", "kv-full", "0"), ("SGLangBatchBoundByKV", "storm", "0")}

    last = {}

    def agree():
        a, b = _figures(central, names), _figures(single, names)
        alerts_a, alerts_b = _alerts(central), _alerts(single)
        last.update(figures=_differences(a, b), alerts=(alerts_a, alerts_b))
        return _same(a, b) and alerts_a == alerts_b and expected_alerts <= alerts_a and (a, alerts_a)

    try:
        figures, alerts = wait_for("the central store's rules and alerts to equal the single Prometheus's", agree,
                                   DEADLINE_S, procs)
    except pytest.fail.Exception as exc:
        raise AssertionError(f"{exc}; central vs single: {last}") from None
    assert not {a for a in alerts if a[1] == "steady"}, alerts
    # The fleet views (the pod aggregated away) count the schedulers and those over each line. Their
    # rule group evaluates on its own schedule: wait for an evaluation that saw every pod's series.
    def fleet_counts() -> list:
        return [central.scalar(f'{name}{{namespace="llm"}}') for name in (
            "namespace:sglang_schedulers:count", "namespace:sglang_schedulers_kv_cache_saturated:count",
            "namespace:sglang_schedulers_retraction_ratio_high:count")]
    wait_for("the fleet counts 3 schedulers, 1 KV-saturated, 0 over the retraction line",
             lambda: fleet_counts() == [3, 1, 0], DEADLINE_S, procs)
    kv = {dict(k)["sglang_group"]: v for k, v in figures.items()
          if dict(k)["__name__"] == "group_dp_rank:sglang_scheduler_kv_usage_observed:mean_rate5m"}
    assert kv["kv-full"] == 1.0 and 0.9 < kv["storm"] < 0.95 and kv["steady"] < 0.5, kv
    p50 = {dict(k)["sglang_group"]: v for k, v in figures.items()
           if dict(k)["__name__"] == "group_dp_rank:sglang_scheduler_decode_batch_size:histogram_quantile_rate5m"
           and dict(k).get("quantile") == "0.5" and dict(k).get("source") == "log"}
    assert 0 < p50["storm"] < 1024, p50
