"""SGLang's per-forward-pass stream through the real command, over real ZeroMQ.

The publisher (tests/fpm_publisher.py) is built from SGLang's struct definitions and sends what
SGLang's ``_FpmPublisherThread`` sends: ``(b"", 8-byte big-endian sequence, msgpack map)``, passes
and heartbeats sharing one sequence. Every wait is on the exporter's own counters, with a deadline.
"""

from __future__ import annotations

import math
import subprocess
import time

import msgspec
import pytest
import zmq
from conftest import CORPUS, samples, value
from fpm_publisher import Publisher, encode, forward_pass
from histogram_quantile import exact_percentile, histogram_quantile, within
from exporter_support import DEADLINE, Exporter, command
from fpm_support import connect as _connect, exporter as _exporter, free_tcp as _free_tcp, messages as _messages

FPM_REQUESTS = "sglang_scheduler_forward_pass_requests"


def _buckets(m: dict, name: str, **labels) -> dict[float, float]:
    want = set(labels.items())
    out = {}
    for (sample, lab), v in m.items():
        d = dict(lab)
        if sample == name + "_bucket" and want <= set(d.items()):
            out[math.inf if d["le"] == "+Inf" else float(d["le"])] = v
    return out


def _promtool_ok(exp: Exporter, promtool: str) -> None:
    _, body = exp.get("/metrics")
    r = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_done_when_1000_passes_7_lost(tmp_path, promtool):
    """Issue 14's "Done when": 1,000 passes, decode batch sizes 1..100, 100 of them with 2 prefill
    requests, 7 sequence numbers missing."""
    ep = f"ipc://{tmp_path}/fpm.0"
    pub = Publisher(ep)
    exp = _exporter(tmp_path, ep)
    try:
        _connect(exp, pub)
        decode_sizes = []
        for i in range(1000):
            if i % 140 == 70:  # 7 gaps, between passes (i = 70, 210, ..., 910)
                pub.skip(1)
            decode_sizes.append(1 + i % 100)
            pub.publish(forward_pass(0, decode=decode_sizes[-1], prefill=2 if i % 10 == 0 else 0,
                                     wall_time=0.001 * (1 + i % 50)))
            if i % 100 == 99:  # ~1,000 passes/s, not a burst beyond the PUB socket's 1,000-message queue
                exp.wait_for(lambda m, n=i + 1: _messages(m, ep, "ok") == n, f"{i + 1} passes")
        pub.heartbeat()  # what SGLang sends once idle
        m = exp.wait_for(lambda m: _messages(m, ep, "heartbeat") >= 2, "the closing heartbeat")
        passes = {mode: value(m, "sglang_scheduler_forward_passes_total", stage="", dp_rank="0", mode=mode)
                  for mode in ("prefill", "decode", "mixed", "idle")}
        assert sum(passes.values()) == 1000
        assert passes == {"prefill": 0, "decode": 900, "mixed": 100, "idle": 0}
        decode = _buckets(m, FPM_REQUESTS, stage="", dp_rank="0", phase="decode")
        assert decode[math.inf] == 1000
        for q, exact in ((0.5, 50), (0.9, 90)):
            assert exact_percentile(q, decode_sizes) == exact
            est = histogram_quantile(q, decode)
            assert within(est, exact), (q, est)
        assert value(m, FPM_REQUESTS + "_count", stage="", dp_rank="0", phase="prefill") == 100
        assert value(m, FPM_REQUESTS + "_sum", stage="", dp_rank="0", phase="prefill") == 200
        assert value(m, FPM_REQUESTS + "_sum", stage="", dp_rank="0", phase="decode") == sum(decode_sizes)
        assert value(m, "sglang_scheduler_forward_pass_seconds_count", stage="", dp_rank="0") == 1000
        assert value(m, "sglang_scheduler_forward_pass_seconds_sum", stage="", dp_rank="0") == pytest.approx(
            sum(0.001 * (1 + i % 50) for i in range(1000)))
        assert value(m, "sglang_scheduler_forward_pass_prefill_tokens_sum", stage="", dp_rank="0") == 100 * 2 * 128
        assert value(m, "sglang_scheduler_forward_pass_decode_kv_tokens_total", stage="", dp_rank="0") == 1000 * sum(decode_sizes)
        assert _messages(m, ep, "lost") == 7
        assert _messages(m, ep, "undecodable") == 0 and _messages(m, ep, "invalid") == 0
        assert value(m, "sglang_exporter_fpm_publisher_restarts_total", endpoint=ep) == 0
        assert value(m, "sglang_exporter_fpm_up", endpoint=ep) == 1
        assert value(m, "sglang_exporter_fpm_schema_info", endpoint=ep, version="", extra_fields="",
                     missing_fields="") == 1
        _promtool_ok(exp, promtool)
    finally:
        pub.close()
        assert exp.terminate() == 0


def test_restart_is_not_a_loss(tmp_path):
    """A scheduler restart (a new publisher on the same socket, sequence from 0) is counted as a
    restart; the exporter's counters keep going."""
    ep = f"ipc://{tmp_path}/fpm.0"
    pub = Publisher(ep)
    exp = _exporter(tmp_path, ep)
    try:
        _connect(exp, pub)
        for _ in range(200):
            pub.publish(forward_pass(0, decode=8))
        exp.wait_for(lambda m: _messages(m, ep, "ok") == 200, "the first publisher's 200 passes")
        pub.close()
        pub = Publisher(ep)  # SGLang restarted: binds again, counts from 0
        assert pub.next_seq == 0
        end = time.monotonic() + DEADLINE
        while True:  # heartbeats until the reconnected exporter sees the new publisher
            pub.heartbeat()
            m = exp.metrics()
            if value(m, "sglang_exporter_fpm_publisher_restarts_total", endpoint=ep) == 1:
                break
            assert time.monotonic() < end, "the restart was never seen"
            time.sleep(0.05)
        for _ in range(30):
            pub.publish(forward_pass(0, decode=4))
        m = exp.wait_for(lambda m: _messages(m, ep, "ok") == 230, "the second publisher's passes")
        assert value(m, "sglang_scheduler_forward_passes_total", stage="", dp_rank="0", mode="decode") == 230
        assert value(m, FPM_REQUESTS + "_sum", stage="", dp_rank="0", phase="decode") == 200 * 8 + 30 * 4
        assert _messages(m, ep, "lost") == 0
        assert value(m, "sglang_exporter_fpm_publisher_restarts_total", endpoint=ep) == 1
    finally:
        pub.close()
        assert exp.terminate() == 0


def test_several_dp_ranks_over_ipc_and_tcp(tmp_path, promtool):
    """One publisher per DP rank (SGLang's ``<name>.<dp_rank>`` sockets, and TCP as in Dynamo): each
    rank keeps its own figures."""
    eps = [f"ipc://{tmp_path}/fpm.0", f"ipc://{tmp_path}/fpm.1", _free_tcp()]
    pubs = [Publisher(ep, dp_rank=rank) for rank, ep in enumerate(eps)]
    exp = _exporter(tmp_path, *eps)
    try:
        for pub in pubs:
            _connect(exp, pub)
        for rank, pub in enumerate(pubs):
            for i in range(10 * (rank + 1)):
                pub.publish(forward_pass(rank, decode=rank + 5, prefill=rank if i == 0 else 0,
                                         queued_prefill=rank + 1, queued_prefill_tokens=100 * (rank + 1),
                                         queued_decode=rank, queued_decode_kv_tokens=1000 * rank))
        m = exp.wait_for(lambda m: all(_messages(m, ep, "ok") == 10 * (r + 1) for r, ep in enumerate(eps)),
                         "every rank's passes")
        for rank in range(3):
            dp = str(rank)
            n = 10 * (rank + 1)
            total = sum(value(m, "sglang_scheduler_forward_passes_total", stage="", dp_rank=dp, mode=mode)
                        for mode in ("prefill", "decode", "mixed", "idle"))
            assert total == n
            assert value(m, FPM_REQUESTS + "_sum", stage="", dp_rank=dp, phase="decode") == n * (rank + 5)
            assert value(m, FPM_REQUESTS + "_count", stage="", dp_rank=dp, phase="prefill") == (1 if rank else 0)
            assert value(m, "sglang_scheduler_forward_pass_queued_requests", stage="", dp_rank=dp, phase="prefill") == rank + 1
            assert value(m, "sglang_scheduler_forward_pass_queued_tokens", stage="", dp_rank=dp, phase="prefill") == 100 * (rank + 1)
            assert value(m, "sglang_scheduler_forward_pass_queued_requests", stage="", dp_rank=dp, phase="decode") == rank
            assert value(m, "sglang_scheduler_forward_pass_queued_tokens", stage="", dp_rank=dp, phase="decode") == 1000 * rank
            assert value(m, "sglang_exporter_fpm_up", endpoint=eps[rank]) == 1
        _promtool_ok(exp, promtool)
    finally:
        for pub in pubs:
            pub.close()
        assert exp.terminate() == 0


def test_other_schemas_extra_and_missing_fields(tmp_path):
    """The versioned variant (version, counter_id) and a payload with fields missing and extra are
    decoded; the schema each endpoint sends is recorded."""
    v1_ep, odd_ep = f"ipc://{tmp_path}/v1.0", f"ipc://{tmp_path}/odd.3"
    v1 = Publisher(v1_ep, dp_rank=0, v1=True)
    odd = Publisher(odd_ep, dp_rank=3)
    enc = msgspec.msgpack.encode

    def odd_payload(decode: int) -> bytes:  # no queued_requests, no worker_id, extra fields at two levels
        return enc({"dp_rank": 3, "wall_time": 0.0 if decode == 0 else 0.01, "timing_scope": "model_step",
                    "scheduled_requests": {"num_decode_requests": decode, "num_cached_prefix_tokens": 7}})

    exp = _exporter(tmp_path, v1_ep, odd_ep)
    try:
        _connect(exp, v1)
        _connect(exp, odd, heartbeat=lambda: odd.send_payload(odd_payload(0)))
        for _ in range(5):
            v1.publish(forward_pass(0, decode=3, v1=True))
            odd.send_payload(odd_payload(6))
        m = exp.wait_for(lambda m: _messages(m, v1_ep, "ok") == 5 and _messages(m, odd_ep, "ok") == 5,
                         "both publishers' passes")
        assert value(m, FPM_REQUESTS + "_sum", stage="", dp_rank="0", phase="decode") == 15
        assert value(m, FPM_REQUESTS + "_sum", stage="", dp_rank="3", phase="decode") == 30
        assert value(m, "sglang_scheduler_forward_pass_queued_requests", stage="", dp_rank="3", phase="prefill") == 0
        assert value(m, "sglang_exporter_fpm_schema_info", endpoint=v1_ep, version="1",
                     extra_fields="counter_id,version", missing_fields="") == 1
        missing = ["queued_requests", "worker_id"] + ["scheduled_requests." + f for f in (
            "num_prefill_requests", "sum_prefill_tokens", "var_prefill_length", "sum_prefill_kv_tokens",
            "sum_decode_kv_tokens", "var_decode_kv_tokens")]
        assert value(m, "sglang_exporter_fpm_schema_info", endpoint=odd_ep, version="",
                     extra_fields="scheduled_requests.num_cached_prefix_tokens,timing_scope",
                     missing_fields=",".join(sorted(missing))) == 1
        assert _messages(m, v1_ep, "lost") == 0 and _messages(m, odd_ep, "lost") == 0
    finally:
        v1.close()
        odd.close()
        assert exp.terminate() == 0


def test_garbage_is_counted_never_fatal(tmp_path, promtool):
    ep = f"ipc://{tmp_path}/fpm.0"
    pub = Publisher(ep)
    exp = _exporter(tmp_path, ep)
    enc = msgspec.msgpack.encode
    try:
        _connect(exp, pub)
        pub.publish(forward_pass(0, decode=2))
        # Frames that are not (topic, 8-byte sequence, payload): no sequence number is taken.
        for frames in ([b"lonely"], [b"", b"1234", enc({"dp_rank": 0})], [b"", b"", b"", b""]):
            pub.send_frames(frames)
        # Payloads that do not decode (each takes a sequence number, as a real message would).
        undecodable = [b"\xc1", b"", b"\x92\x01\x02", enc([1, 2, 3]), enc("text"),
                       enc({"dp_rank": "zero"}), enc({"wall_time": "slow"}), enc({"scheduled_requests": None}),
                       bytes(range(256))]
        for payload in undecodable:
            pub.send_payload(payload)
        # Payloads that decode to values SGLang cannot send.
        invalid = [enc({"wall_time": -1.0, "scheduled_requests": {"num_decode_requests": 1}}),
                   enc({"wall_time": 0.01, "scheduled_requests": {"num_decode_requests": 1.5}}),
                   enc({"wall_time": float("nan"), "scheduled_requests": {"num_decode_requests": 1}}),
                   enc({"wall_time": 0.01, "scheduled_requests": {"num_decode_requests": -3}}),
                   enc({"wall_time": 0.01, "scheduled_requests": {"num_decode_requests": 10**16}}),
                   enc({"dp_rank": 10**6, "wall_time": 0.01}), enc({"dp_rank": -1, "wall_time": 0.01})]
        for payload in invalid:
            pub.send_payload(payload)
        pub.publish(forward_pass(0, decode=4))
        m = exp.wait_for(lambda m: _messages(m, ep, "ok") == 2, "the passes around the garbage")
        assert _messages(m, ep, "undecodable") == 3 + len(undecodable)
        assert _messages(m, ep, "invalid") == len(invalid)
        assert _messages(m, ep, "lost") == 0
        assert value(m, FPM_REQUESTS + "_sum", stage="", dp_rank="0", phase="decode") == 6
        assert {dict(k[1]).get("dp_rank") for k in m if k[0] == "sglang_scheduler_forward_passes_total"} == {"0"}
        assert value(m, "sglang_exporter_collector_success", collector="fpm") == 1
        assert exp.get("/healthz") == (200, "ok\n")
        _promtool_ok(exp, promtool)
    finally:
        pub.close()
        assert exp.terminate() == 0


def test_overload_is_counted_as_lost_and_memory_stays_bounded(tmp_path):
    """A flood far beyond 1,000 passes/s: the exporter's queue is bounded (ZeroMQ drops beyond it),
    and every sequence number is accounted for, received or lost."""
    ep = f"ipc://{tmp_path}/fpm.0"
    pub = Publisher(ep)
    pub.pub.setsockopt(zmq.SNDHWM, 0)  # the publisher keeps everything: any drop is the exporter's
    exp = _exporter(tmp_path, ep)
    try:
        _connect(exp, pub)
        connect_beats = pub.next_seq
        n = 60_000
        payload = encode(forward_pass(0, decode=7))
        for _ in range(n):
            pub.send_payload(payload)
        before = _messages(exp.metrics(), ep, "heartbeat")
        end = time.monotonic() + DEADLINE
        while _messages(exp.metrics(), ep, "heartbeat") == before:  # SGLang's idle heartbeat ends the burst
            pub.heartbeat()
            assert time.monotonic() < end, "no heartbeat after the burst"
            time.sleep(0.1)
        m = exp.wait_for(lambda m: sum(_messages(m, ep, r) for r in ("ok", "heartbeat", "lost"))
                         >= pub.next_seq - connect_beats, "every sequence number accounted for")
        accounted = sum(_messages(m, ep, r) for r in ("ok", "heartbeat", "lost"))
        assert pub.next_seq - connect_beats <= accounted <= pub.next_seq
        assert _messages(m, ep, "ok") + _messages(m, ep, "lost") >= n
        assert value(m, FPM_REQUESTS + "_sum", stage="", dp_rank="0", phase="decode") == 7 * _messages(m, ep, "ok")
        with open(f"/proc/{exp.proc.pid}/status") as f:
            rss_mb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024
        assert rss_mb < 150, rss_mb  # about 50 MB in steady state; the queue holds at most 10,000 messages
    finally:
        pub.close()
        assert exp.terminate() == 0


def test_endpoint_down_then_up(tmp_path):
    """No publisher yet: the exporter serves, fpm_up is 0, one warning names the endpoint. The server
    comes up, goes away, comes back: up follows, the counts carry on, no second warning."""
    ep = _free_tcp()
    exp = _exporter(tmp_path, ep, timeout=1.0)
    pub = None
    try:
        m = exp.metrics()
        assert value(m, "sglang_exporter_fpm_up", endpoint=ep) == 0
        assert value(m, "sglang_exporter_collector_success", collector="fpm") == 1
        end = time.monotonic() + DEADLINE
        while not any("WARNING" in line and ep in line for line in exp.stderr_lines):
            assert time.monotonic() < end, "no warning about the missing publisher"
            time.sleep(0.05)
        assert exp.get("/healthz") == (200, "ok\n")

        for round_ in (1, 2):
            pub = Publisher(ep)
            _connect(exp, pub)
            for _ in range(10):
                pub.publish(forward_pass(0, decode=1))
            m = exp.wait_for(lambda m: value(m, "sglang_scheduler_forward_passes_total", stage="", dp_rank="0",
                                             mode="decode") == 10 * round_, f"round {round_}'s passes")
            assert value(m, "sglang_exporter_fpm_up", endpoint=ep) == 1
            assert "sglang_scheduler_forward_pass_queued_requests" in {k[0] for k in m}
            pub.close()
            pub = None
            m = exp.wait_for(lambda m: value(m, "sglang_exporter_fpm_up", endpoint=ep) == 0,
                             "fpm_up 0 once the publisher is gone")
            # The latest pass's queue is withheld once the scheduler is silent.
            assert "sglang_scheduler_forward_pass_queued_requests" not in {k[0] for k in m}
        assert value(m, "sglang_exporter_fpm_publisher_restarts_total", endpoint=ep) == 1
        assert sum("WARNING" in line and ep in line for line in exp.stderr_lines) == 1
    finally:
        if pub is not None:
            pub.close()
        assert exp.terminate() == 0


def test_bad_endpoint_stops_startup_with_exit_2(tmp_path):
    log = tmp_path / "sglang.log"
    log.touch()
    for bad in ("tcp://*:20380", "http://127.0.0.1:1", "ipc://", "tcp://127.0.0.1", "tcp://127.0.0.1:0",
                f"ipc://{tmp_path}/a,ipc://{tmp_path}/a", f"ipc://{tmp_path}/a,"):
        r = subprocess.run([*command(), "--log.path", str(log), "--fpm.endpoints", bad],
                           capture_output=True, text=True, timeout=DEADLINE)
        assert r.returncode == 2, (bad, r.stderr)
        assert "fpm.endpoints (--fpm.endpoints, SGLANG_EXPORTER_FPM__ENDPOINTS)" in r.stderr, r.stderr
        assert r.stderr.count("\n") == 1, r.stderr  # one line, no traceback


def test_one_shot_ignores_the_stream(tmp_path):
    """--one-shot reads a recorded log: nothing live is subscribed to, no fpm series."""
    log = tmp_path / "sglang.log"
    log.write_text((CORPUS / "008-retraction-storm-tokens-gained-uvicorn.log").read_text(encoding="utf-8"))
    r = subprocess.run([*command(), "--log.path", str(log), "--one-shot", "--fpm.endpoints",
                        f"ipc://{tmp_path}/fpm.0"], capture_output=True, text=True, timeout=DEADLINE)
    assert r.returncode == 0, r.stderr
    names = {k[0] for k in samples(r.stdout)}
    assert "sglang_exporter_build_info" in names
    assert not [n for n in names if "fpm" in n or "forward_pass" in n]
