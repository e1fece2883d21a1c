"""A test bed scenario run with the sidecar following it live (``tests/test_real_sglang.py``).

The sidecar (the real ``sglang-exporter`` command) starts before the server, on a log that does not
exist yet, and follows it (and the per-pass stream) while the server writes it; it is scraped right
after every scrape of SGLang's own ``/metrics``. When the run is over the finished log is read again
by ``--one-shot`` and ``report --format json``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import IN_CI, ROOT, samples
from exporter_support import Exporter, command
from prometheus_support import dashboard_targets, start_prometheus, stop, wait_for
from rules_support import RULE_FILES

sys.path.insert(0, str(ROOT))
from testbed import scenarios, stack  # noqa: E402

DEADLINE = 60.0


def require_stack(version: str) -> None:
    """Skip (locally) or fail (under CI=true) when the SGLang stack of ``version`` is not built."""
    if not stack.ready(version):
        msg = (f"the SGLang {version} test bed is not built in {stack.cache_dir()}: "
               f"run 'python3 -m testbed build {stack.PINNED_BY_OMNI.get(version, version)}' (.ci/run does)")
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)


def series(text: str, name: str, **labels) -> list[float]:
    """Values of every sample called ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return [v for (n, lab), v in samples(text).items() if n == name and want <= set(lab)]


def one(text: str, name: str, **labels) -> float:
    """The sum over the samples of :func:`series` (SGLang labels by TP/PP rank; one series each here)."""
    found = series(text, name, **labels)
    assert found, f"no sample {name} {labels}"
    return sum(found)


@dataclass
class LiveRun:
    """A finished scenario run: SGLang's records, the sidecar's scrapes and the offline readings."""

    run: scenarios.Run
    pairs: list[tuple[int, str, str, str]] = field(default_factory=list)  # (start, label, sglang, sidecar)
    after: list[str] = field(default_factory=list)  # SGLang's /metrics right after each sidecar scrape
    final: str = ""            # the sidecar's /metrics once it has read the whole log
    one_shot: str = ""         # --one-shot on the finished log
    report: dict = field(default_factory=dict)   # report --format json on the finished log
    sidecar_log: str = ""      # the sidecar's own stderr
    # with prometheus=True: every query of the on-call dashboard when the load is over (the server
    # still up) on a real Prometheus that scraped the sidecar and SGLang every second with the
    # shipped rules: (title, refId) -> [(labels, value)]
    oncall: dict = field(default_factory=dict)
    oncall_history: dict = field(default_factory=dict)  # the same queries every second since the sidecar started

    def sglang(self, start: int, label: str = "end") -> str:
        return self.run.prom(start, label)

    def sglang_delta(self, name: str, **labels) -> float:
        """Sum over the starts of (end - ready) of an SGLang counter: what the load did, warm-up excluded."""
        return sum(one(self.sglang(i), name, **labels) - one(self.sglang(i, "ready"), name, **labels)
                   for i in range(len(self.run.starts)))

    def sglang_total(self, name: str, **labels) -> float:
        """Sum over the starts of an SGLang counter at the end (each start's counters begin at 0)."""
        return sum(one(self.sglang(i), name, **labels) for i in range(len(self.run.starts)))


def stamp_resolution_bound(log: str, admitted: float) -> float:
    """The most the time-integrated queue can be off per admission when lines are stamped to the
    second: within each second the queue is known only to lie between the least and the largest
    ``#queue-req`` printed in it (with the value carried in from the second before), for at most the
    whole second; summed over the seconds, over the admissions."""
    spread: dict[str, tuple[int, int]] = {}
    last = None
    for m in re.finditer(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\].*#queue-req: (\d+)", log, re.M):
        second, q = m.group(1), int(m.group(2))
        if second not in spread:
            spread[second] = (q, q) if last is None else (min(q, last), max(q, last))
        low, high = spread[second]
        spread[second] = (min(low, q), max(high, q))
        last = q
    return sum(high - low for low, high in spread.values()) / admitted


_RUNS: dict[tuple[str, str], LiveRun] = {}


def run_once(version: str, name: str, tmp_path_factory, prometheus: bool = False) -> LiveRun:
    """:func:`live_run` of scenario ``name`` on ``version``, once per test session: the tests of
    one scenario share its run (each run takes minutes of a real server)."""
    key = (version, name)
    if key not in _RUNS:
        _RUNS[key] = live_run(version, name, records_root(tmp_path_factory), prometheus=prometheus)
    return _RUNS[key]


def records_root(tmp_path_factory) -> Path:
    """Where runs keep their records: ``$SGLANG_TESTBED_RECORDS`` (kept after the session,
    e.g. for a closing note or ``python3 -m testbed keep``), else a pytest temporary folder."""
    import os

    env = os.environ.get("SGLANG_TESTBED_RECORDS")
    return Path(env) if env else tmp_path_factory.mktemp("testbed")


def read_to_end(sidecar: Exporter, log: Path) -> str:
    """Scrape ``sidecar`` until it has read all of ``log`` (at most :data:`DEADLINE` seconds); its
    last ``/metrics`` text. Fails when it has not."""
    size = log.stat().st_size
    deadline = time.monotonic() + DEADLINE
    while True:
        text = sidecar.get("/metrics")[1]
        read = sum(series(text, "sglang_exporter_log_bytes_read_total"))
        if read >= size or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert read >= size, f"the sidecar read {read} of {size} bytes of the log"
    return text


#: The pod label Prometheus gives both targets of a run, as Kubernetes would the sidecar and its server.
POD = "testbed"
ONCALL = ROOT / "grafana" / "sglang-oncall.json"


class RunPrometheus:
    """A real Prometheus with the shipped rules scraping, every second, the sidecar and the SGLang
    server of the running start (``before_start`` hands it over through a file of targets), both as
    pod :data:`POD`: what a PodMonitor and SGLang's own scrape give in a cluster."""

    def __init__(self, folder: Path, sidecar_port: int):
        self.started = time.time()
        shutil.rmtree(folder, ignore_errors=True)  # a kept records folder's earlier run: not this one's series
        folder.mkdir()
        self.targets = folder / "sglang-targets.json"
        self.targets.write_text("[]")
        self.proc, self.prom = start_prometheus({
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(p) for p in RULE_FILES],
            "scrape_configs": [
                {"job_name": "sglang-exporter",
                 "static_configs": [{"targets": [f"127.0.0.1:{sidecar_port}"], "labels": {"pod": POD}}]},
                {"job_name": "sglang", "file_sd_configs": [{"files": [str(self.targets)], "refresh_interval": "1s"}]},
            ]}, folder)

    def before_start(self, i: int, server) -> None:
        self.targets.write_text(json.dumps([{"targets": [f"127.0.0.1:{server.port}"], "labels": {"pod": POD}}]))

    def oncall(self, sidecar: str) -> tuple[dict, dict]:
        """Every on-call query now and over the run so far (every second since Prometheus started),
        once Prometheus holds the retractions of the sidecar's ``/metrics`` text ``sidecar`` and every
        rule has been evaluated after that scrape."""
        want = one(sidecar, "sglang_scheduler_retractions_total")
        stored = wait_for(f"Prometheus to store the sidecar's {want} retractions", lambda: (
            self.prom.scalar(f'sum(sglang_scheduler_retractions_total{{pod="{POD}"}})') == want
            and self.prom.scalar(f'max(timestamp(up{{pod="{POD}", job="sglang-exporter"}}))')), procs=(self.proc,))
        wait_for("every rule group evaluated after that scrape",
                 lambda: min(self.prom.rule_evaluations()) > stored + 2, procs=(self.proc,))
        targets = dashboard_targets(json.loads(ONCALL.read_text()))
        now = {(title, ref): [(r["metric"], float(r["value"][1])) for r in self.prom.query(expr)]
               for title, ref, expr in targets}
        end = time.time()
        history = {(title, ref): [(r["metric"], [float(v) for _, v in r["values"]])
                                  for r in self.prom.query_range(expr, self.started, end)]
                   for title, ref, expr in targets}
        return now, history


def live_run(version: str, name: str, root: Path, prometheus: bool = False) -> LiveRun:
    """Run scenario ``name`` on SGLang ``version`` under ``root`` with the sidecar following it (and,
    with ``prometheus``, a real Prometheus scraping both: :class:`RunPrometheus`, ``LiveRun.oncall``)."""
    scenario = scenarios.SCENARIOS[name]
    out = root / f"{version}-{name}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "server.log").unlink(missing_ok=True)
    args = ["--log.path", str(out / "server.log"), "--log.from-beginning", "--gpu.enabled", "false"]
    if scenario.fpm_ranks:
        endpoint = scenario.fpm_endpoint(out)
        args += ["--fpm.endpoints", ",".join(f"{endpoint}.{r}" for r in range(scenario.fpm_ranks))]
    sidecar = Exporter(*args)
    live = LiveRun(run=None)  # type: ignore[arg-type]
    prom = None
    try:
        prom = RunPrometheus(out / "prometheus", sidecar.port) if prometheus else None
        def on_scrape(i: int, label: str, text: str, again) -> None:
            side = sidecar.get("/metrics")[1]
            live.pairs.append((i, label, text, side))
            live.after.append(again())
            if prom and label == "end" and i == len(scenario.starts) - 1:  # the load is over, SGLang still up
                live.oncall, live.oncall_history = prom.oncall(side)

        live.run = scenario.run(out, version, on_scrape=on_scrape, before_start=prom and prom.before_start)
        text = read_to_end(sidecar, out / "server.log")
        deadline = time.monotonic() + DEADLINE
        # the stream may lag the log: the server has stopped, so wait until its count stands still
        count, still = None, 0
        while scenario.fpm_ranks and still < 3 and time.monotonic() < deadline:
            text = sidecar.get("/metrics")[1]
            now = sum(series(text, "sglang_exporter_fpm_messages_total"))
            still = still + 1 if now == count else 0
            count = now
            time.sleep(0.5)
        live.final = text
    finally:
        if prom:
            stop(prom.proc)
        sidecar.terminate()
        live.sidecar_log = "".join(sidecar.stderr_lines)
    log = str(out / "server.log")
    live.one_shot = subprocess.run([*command(), "--log.path", log, "--one-shot"], check=True,
                                   capture_output=True, text=True).stdout
    live.report = json.loads(subprocess.run([*command(), "report", log, "--format", "json"], check=True,
                                            capture_output=True, text=True).stdout)
    # kept beside SGLang's records, for a reader comparing the two
    (out / "sidecar-final.prom").write_text(live.final)
    (out / "one-shot.prom").write_text(live.one_shot)
    (out / "report.json").write_text(json.dumps(live.report, indent=1))
    if prometheus:  # what the on-call dashboard showed, query by query
        (out / "oncall.json").write_text(json.dumps([{"panel": t, "ref": r, "now": live.oncall[t, r],
                                                      "history": live.oncall_history[t, r]}
                                                     for t, r in live.oncall], indent=1))
    with open(out / "scrapes.jsonl", "w") as f:  # every bracketed scrape: SGLang, the sidecar, SGLang
        for (i, label, before, side), after in zip(live.pairs, live.after):
            f.write(json.dumps({"start": i, "label": label, "sglang": before, "sidecar": side, "sglang_after": after}) + "\n")
    return live
