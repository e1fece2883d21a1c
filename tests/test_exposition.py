"""The whole ``/metrics`` text, as node_exporter's e2e-output.txt: one golden for the bundled sample.

``tests/golden/e2e-output.prom`` is what the command's registry serves (``cli.build_registry``) after
a one-shot read of ``exporter/data/sample.log``, with the GPU collector polling the fake NVML backend
(``exporter_support.fake_gpu_poller``): every family's HELP and TYPE, every bucket, every GPU series.
Samples whose value depends on the machine or the moment are left out (their HELP and TYPE stay).
A change of a HELP text, a label, a bucket bound or a value shows as a diff of that file. Regenerate
with ``UPDATE_GOLDEN=1 python -m pytest tests/test_exposition.py`` and check the diff by hand
(tests/golden/CHECKED.md records the first check).
"""

from __future__ import annotations

import os
import re
import subprocess
import time

import pytest

from conftest import CORPUS, ROOT
from exporter_support import fake_gpu_poller, one_shot
from prometheus_client import generate_latest

from exporter.cli import build_registry
from exporter.scheduler.state import SchedulerStates
from exporter.scheduler.store import SchedulerStore
from exporter.sources.gpu.collector import GpuCollector
from exporter.sources.log.ingest import Ingest
from exporter.sources.log.source import LogSource

GOLDEN = ROOT / "tests" / "golden" / "e2e-output.prom"
SAMPLE = "exporter/data/sample.log"  # relative, so that the path label is the same on every machine
#: Series whose value is the machine's or the moment's, not the log's: left out of the golden.
VOLATILE = re.compile(r"^(sglang_exporter_last_line_timestamp_seconds"
                      r"|sglang_scheduler_last_stats_line_timestamp_seconds"
                      r"|sglang_exporter_collector_duration_seconds|sglang_exporter_build_info"
                      r"|sglang_gpu_snapshot_age_seconds)[ {]")
HEADER = ("# The whole /metrics text for exporter/data/sample.log (one-shot) with the GPU collector on\n"
          "# tests/gpu_fake.py; machine- and time-dependent samples left out. Written by\n"
          "# tests/test_exposition.py (UPDATE_GOLDEN=1); hand-checked, see tests/golden/CHECKED.md.\n")


def stable(text: str) -> str:
    """The exposition without its volatile samples."""
    return "".join(line + "\n" for line in text.splitlines() if not VOLATILE.match(line))


def whole_exposition(monkeypatch) -> str:
    monkeypatch.chdir(ROOT)
    # as the command builds it without --sglang.decode-log-interval: the interval is the default
    store = SchedulerStore(SchedulerStates(decode_log_interval_source="default"))
    log = LogSource([SAMPLE], store, from_beginning=True)
    log.read_all()
    poller, _ = fake_gpu_poller()
    try:
        return generate_latest(build_registry(store, log, None, GpuCollector(poller))).decode()
    finally:
        poller.stop(timeout=5)


def test_whole_exposition_golden(monkeypatch, promtool):
    got = HEADER + stable(whole_exposition(monkeypatch))
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(got)
    assert got == GOLDEN.read_text()
    lint = subprocess.run([promtool, "check", "metrics"], input=GOLDEN.read_bytes(), capture_output=True, timeout=60)
    assert lint.returncode == 0, lint.stdout.decode() + lint.stderr.decode()


def test_the_golden_is_what_the_one_shot_command_prints(monkeypatch):
    """Without NVML the command's own one-shot output is the golden less the GPU families."""
    monkeypatch.chdir(ROOT)
    command = stable(one_shot(ROOT / SAMPLE)).replace(str(ROOT / SAMPLE), SAMPLE)
    golden = [line for line in GOLDEN.read_text().splitlines(keepends=True)[HEADER.count("\n"):]
              if "sglang_gpu_" not in line and 'collector="gpu"' not in line]
    assert command == "".join(golden)


def test_full_registry_exposition_lints_clean(promtool):
    store = SchedulerStore(SchedulerStates())
    p = Ingest(store)
    for name in ("008-retraction-storm-tokens-gained-uvicorn.log", "024-dp-attention-mtp-dp-tp-tags.log",
                 "010-pd-prefill-node0-mooncake-transfer-fail.log", "019-npu-mamba-usage-full-token-prefill-burst.log"):
        p.feed((CORPUS / name).read_text(encoding="utf-8").splitlines())
    text = generate_latest(build_registry(store, LogSource([], store), None))
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, timeout=60)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()


# --- the /metrics renderer (exporter/exposition.py) ---------------------------------------------

OPENMETRICS = "application/openmetrics-text; version=1.0.0"
_DURATION = re.compile(r"^sglang_exporter_collector_duration_seconds.*\n", re.M)


def _live_registry(lines: list[str]):
    from scheduler_support import DECODE

    store = SchedulerStore(SchedulerStates())
    log = LogSource([], store)
    log.ingest.feed(lines or [DECODE.format(s=1, tags=" DP0 TP0", r=1, t=1, q=0)])
    return log, build_registry(store, log, 3600.0)


def test_the_renderer_serves_what_the_library_encodes_in_both_formats():
    """Family by family, with unchanged families' text reused, the body is byte for byte the library's
    own (text format and OpenMetrics, name[] filter), before and after the state changes."""
    from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest
    from scheduler_support import DECODE, PREFILL

    from exporter.exposition import Renderer

    lines = [DECODE.format(s=i % 60, tags=f" DP{i % 4} TP{i % 4}", r=i, t=10 * i, q=i % 7) for i in range(200)]
    lines += [PREFILL.format(s=i % 60, tags=f" DP{i % 4} TP{i % 4}", n=1 + i % 3, t=100 + i, q=i % 5)
              for i in range(200)]
    log, registry = _live_registry(lines)
    renderer = Renderer(registry)
    for round_ in range(3):
        text, content_type = renderer.render()
        assert content_type.startswith("text/plain")
        assert _DURATION.sub("", text.decode()) == _DURATION.sub("", generate_latest(registry).decode())
        om, content_type = renderer.render(OPENMETRICS)
        assert content_type.startswith("application/openmetrics-text") and om.endswith(b"# EOF\n")
        assert _DURATION.sub("", om.decode()) == _DURATION.sub("", openmetrics_latest(registry).decode())
        only, _ = renderer.render(names=["sglang_scheduler_retractions_total", "sglang_exporter_build_info"])
        assert {ln.split("{")[0].split(" ")[0] for ln in only.decode().splitlines() if not ln.startswith("#")} == {
            "sglang_scheduler_retractions_total", "sglang_exporter_build_info"}
        log.ingest.feed([DECODE.format(s=round_, tags=" DP9 TP9", r=5, t=50, q=1)])  # a new scheduler


def test_unchanged_families_are_not_encoded_again(monkeypatch):
    """While the store's generation and the schedulers' freshness stand, the scheduler collector yields
    the same families and the renderer reuses their text; a new line changes both."""
    from scheduler_support import DECODE

    from exporter import exposition

    log, registry = _live_registry([DECODE.format(s=i, tags=f" DP{i % 8} TP0", r=i, t=i, q=1) for i in range(64)])
    encoded = []
    real = exposition.Renderer._encode

    def counting(self, encoder, content_type):
        calls = []
        wrapped = lambda one: calls.append(one.family.name) or encoder(one)  # noqa: E731
        body = real(self, wrapped, content_type)
        encoded.append(calls)
        return body

    monkeypatch.setattr(exposition.Renderer, "_encode", counting)
    renderer = exposition.Renderer(registry, fast_text=False)  # every family through the encoder
    renderer.render()
    renderer.render(arrived=renderer.clock())
    first, second = encoded
    assert "sglang_scheduler_batch_size" in first and "sglang_scheduler_batch_size" not in second
    assert "sglang_exporter_collector_duration_seconds" in second  # changes every scrape
    log.ingest.feed([DECODE.format(s=1, tags=" DP3 TP0", r=7, t=7, q=1)])
    renderer.render(arrived=renderer.clock())
    assert "sglang_scheduler_batch_size" in encoded[2]


def test_an_equal_family_reuses_its_text_and_any_other_value_is_encoded():
    """A collector that builds new family objects each scrape: an equal family (samples, values bit for
    bit) reuses the previous text; another value, -0.0 for 0.0, another label or help is encoded anew;
    the body is the library's every time."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import GaugeMetricFamily

    from exporter.exposition import Renderer

    state = {"value": 0.0, "label": "a", "help": "A gauge."}

    class Gauges:
        def collect(self):
            fam = GaugeMetricFamily("test_gauge", state["help"], labels=["which"])
            fam.add_metric([state["label"]], state["value"])
            yield fam
            other = GaugeMetricFamily("test_other", "Another gauge.", labels=["which"])
            other.add_metric(["x"], float("nan"))
            yield other

    registry = CollectorRegistry()
    registry.register(Gauges())
    renderer = Renderer(registry)
    encoded = []
    real = renderer._encode.__func__

    def counting(self, encoder, content_type):
        def wrapped(one):
            encoded.append(one.family.name)
            return encoder(one)
        return real(self, wrapped, content_type)

    renderer._encode = counting.__get__(renderer)
    steps = [({}, True), ({}, False), ({"value": -0.0}, True), ({"value": -0.0}, False), ({"value": 1.0}, True),
             ({"label": "b"}, True), ({"help": "Changed."}, True), ({}, False)]
    for step, encodes in steps:
        state.update(step)
        encoded.clear()
        body, _ = renderer.render(arrived=renderer.clock())
        assert body == generate_latest(registry)
        assert ("test_gauge" in encoded) == encodes, (step, encoded)
        assert "test_other" in encoded  # NaN: a new float object each time, never equal


def test_concurrent_scrapes_share_renders_never_older_than_themselves():
    """64 scrapes at once cost a few renders, one at a time; each body comes from a render that started
    after its scrape arrived."""
    import threading

    from exporter.exposition import Renderer

    log, registry = _live_registry([])
    renderer = Renderer(registry)
    inside, most = [0], [0]
    real = renderer._encode

    def encode(*args):
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        try:
            time.sleep(0.05)  # a render long enough for the other scrapes to arrive meanwhile
            return real(*args)
        finally:
            inside[0] -= 1

    renderer._encode = encode
    start = threading.Barrier(64)
    bodies = []

    def scrape():
        start.wait()
        arrived = renderer.clock()
        body, _ = renderer.render(arrived=arrived)
        bodies.append((arrived, body))

    threads = [threading.Thread(target=scrape) for _ in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(bodies) == 64 and most[0] == 1
    assert renderer.renders <= 4, renderer.renders
    assert all(b"sglang_scheduler_batches_total" in body for _, body in bodies)


def test_a_scrape_storm_does_not_hold_up_the_log_reader(tmp_path):
    """The real command with 64 schedulers (about 9,000 series): lines appended at 500 per second are
    read as promptly while 32 clients scrape without pause as while nobody scrapes."""
    import threading
    import urllib.request

    from exporter_support import Exporter
    from scheduler_support import DECODE

    path = tmp_path / "sglang.log"
    path.write_text("".join(DECODE.format(s=dp % 60, tags=f" DP{dp} TP0", r=1, t=1, q=0) + "\n"
                            for dp in range(64)))
    exp = Exporter("--log.path", str(path), "--log.from-beginning", "--gpu.enabled", "false")
    written = [64]

    def lines_read() -> float:
        return sum(v for (name, _), v in exp.metrics().items() if name == "sglang_exporter_log_lines_total")

    def lag_while_writing(seconds: float, rate: float = 500.0) -> float:
        """Most lines written but not yet read, sampled every 0.2 s while appending."""
        worst = 0.0
        with open(path, "a") as f:
            end = time.monotonic() + seconds
            next_sample = time.monotonic()
            while time.monotonic() < end:
                dp = written[0] % 64
                f.write(DECODE.format(s=written[0] % 60, tags=f" DP{dp} TP0", r=2, t=2, q=1) + "\n")
                f.flush()
                written[0] += 1
                if time.monotonic() >= next_sample:
                    worst = max(worst, written[0] - lines_read())
                    next_sample += 0.2
                time.sleep(1.0 / rate)
        return worst

    try:
        exp.wait_for(lambda m: len([k for k in m if k[0] == "sglang_scheduler_running_requests"]) == 64,
                     "64 schedulers")
        quiet = lag_while_writing(3.0)
        stop = threading.Event()
        scrapes = [0]

        def storm():
            while not stop.is_set():
                with urllib.request.urlopen(f"http://127.0.0.1:{exp.port}/metrics", timeout=30) as r:
                    r.read()
                scrapes[0] += 1

        clients = [threading.Thread(target=storm, daemon=True) for _ in range(32)]
        for c in clients:
            c.start()
        try:
            stormy = lag_while_writing(3.0)
        finally:
            stop.set()
            for c in clients:
                c.join(30)
        assert scrapes[0] > 32
        # Before renders were bounded and shared, the reader fell thousands of lines behind here.
        assert stormy <= max(4 * quiet, 250), (quiet, stormy)
        exp.wait_for(lambda m: sum(v for (n, _), v in m.items() if n == "sglang_exporter_log_lines_total")
                     >= written[0], "every line read")
    finally:
        exp.terminate()


def image_environment() -> dict[str, str]:
    """This environment plus the variables the container image sets (the Dockerfile's ``ENV``), but
    its settings (the test gives its own) and ``PATH``."""
    text = (ROOT / "Dockerfile").read_text()
    text = text[text.rindex("\nFROM "):]  # the final stage
    env = dict(os.environ)
    for block in re.findall(r"^ENV ((?:.*\\\n)*.*)$", text, re.M):
        for name, value in re.findall(r"(\w+)=(\S+)", block):
            if name != "PATH" and not name.startswith("SGLANG_EXPORTER_"):
                env[name] = value
    return env


def manifest_memory_limit_mib() -> float:
    """The sidecar's memory limit in the Kubernetes manifests (``limits: memory: <N>Mi``)."""
    text = (ROOT / "deploy" / "kubernetes" / "base" / "sidecar-patch.yaml").read_text()
    return float(re.search(r"limits:\s*\n\s*cpu: \S+\s*\n\s*memory: (\d+)Mi", text).group(1))


@pytest.mark.parametrize("tp_tags,stream", [(1, False), (16, False), (16, True)],
                         ids=["256-schedulers", "4096-replicas", "4096-replicas-and-stream"])
def test_the_caps_fit_the_manifests_memory_limit(tmp_path, tp_tags, stream):
    """The real command at its caps, with the container image's environment: 256 DP ranks in the
    log (a 257th is refused), each printed by ``tp_tags`` TP ranks (16: the 4,096-replica cap), and
    with ``stream`` the per-pass stream of 256 DP ranks too. After text scrapes, then one scrape with
    Prometheus' ``Accept`` (OpenMetrics), the peak RSS (``VmHWM``) is under the manifests' memory
    limit and the log's series are within the budget of docs/metrics.md (at most 360 per scheduler)."""
    import sys
    import urllib.request

    from exporter_support import Exporter

    from exporter.limits import MAX_REPLICAS, MAX_SCHEDULERS

    sys.path.insert(0, str(ROOT / "bench"))
    from render import _dp_lines

    lines = _dp_lines(str(CORPUS / "008-retraction-storm-tokens-gained-uvicorn.log"), per_rank=25,
                      ranks=MAX_SCHEDULERS + 1, stamp=time.strftime("%Y-%m-%d %H:%M:%S"))
    lines = [re.sub(r" TP\d+\]", f" TP{t}]", ln, count=1) for ln in lines for t in range(tp_tags)]
    assert MAX_SCHEDULERS * tp_tags <= MAX_REPLICAS
    path = tmp_path / "sglang.log"
    path.write_text("\n".join(lines) + "\n")
    args = ["--log.path", str(path), "--log.from-beginning", "--gpu.enabled", "false"]
    pub = None
    if stream:
        from fpm_publisher import Publisher, forward_pass

        pub = Publisher(f"ipc://{tmp_path}/fpm.0")
        args += ["--fpm.endpoints", pub.endpoint]
    exp = Exporter(*args, env=image_environment())
    try:
        def ready() -> str | None:
            """The body once every line is read (and with the stream, every rank's passes seen)."""
            if pub is not None:  # a SUB socket joins late: publish again until every rank is seen
                for dp in range(MAX_SCHEDULERS + 1):
                    pub.publish(forward_pass(dp, prefill=dp % 3, decode=dp % 50 + 1, wall_time=0.001 * (dp % 30 + 1)))
            with urllib.request.urlopen(f"http://127.0.0.1:{exp.port}/metrics", timeout=120) as r:
                body = r.read().decode()  # a first render at 256 ranks cuts every template: seconds
            read = sum(map(float, re.findall(r"^sglang_exporter_log_lines_total\{.*\} (\S+)$", body, re.M)))
            passes = set(re.findall(r'^sglang_scheduler_forward_passes_total\{dp_rank="(\d+)"', body, re.M))
            return body if read >= len(lines) and (pub is None or len(passes) == MAX_SCHEDULERS) else None

        deadline = time.monotonic() + 120
        while (body := ready()) is None:
            assert time.monotonic() < deadline, "lines or passes not all read"
            time.sleep(0.2)
        log_series = [ln for ln in body.splitlines() if ln and not ln.startswith("#")
                      and not ln.startswith(("sglang_scheduler_forward_pass", "sglang_exporter_fpm"))]
        ranks = set(re.findall(r'^sglang_scheduler_\w+\{dp_rank="(\d+)"', body, re.M))
        assert len(ranks) == MAX_SCHEDULERS and str(MAX_SCHEDULERS) not in ranks
        # no capacity line: every batch-size bucket, prefill tokens one per power of two (docs/metrics.md)
        assert MAX_SCHEDULERS * 300 < len(log_series) <= MAX_SCHEDULERS * 360 + 500
        req = urllib.request.Request(f"http://127.0.0.1:{exp.port}/metrics", headers={"Accept": (
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5")})
        with urllib.request.urlopen(req, timeout=120) as r:
            assert r.headers["Content-Type"].startswith("application/openmetrics-text")
            assert r.read().endswith(b"# EOF\n")
        with open(f"/proc/{exp.proc.pid}/status") as f:
            hwm = next(int(row.split()[1]) for row in f if row.startswith("VmHWM:")) / 1024
        assert hwm < manifest_memory_limit_mib(), hwm
    finally:
        exp.terminate()
        if pub is not None:
            pub.close()
