"""Issue 12 items 3 (report part), 7-11 and issue 11 item 4 (report part): each fault with the
issue's stand-in input and the right value, worked out by hand in the comments."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from exporter import cli
from exporter.report import compare
from exporter.report.text import text
from exporter.status import ExitStatus

from conftest import CORPUS, corpus_files
from report_support import report_files as from_files
from report_support import report_lines as from_lines

STORM = CORPUS / "008-retraction-storm-tokens-gained-uvicorn.log"
STARTUP = CORPUS / "009-startup-cudagraph-tqdm-warmup-no-rank-tag.log"
PD_DECODE = CORPUS / "028-pd-decode-prealloc-transfer-retracted-fields.log"
ACCESS_LOG = CORPUS / "042-access-log-only-no-decode-lines.log"


def decode(t: str, running: int, tokens: int, usage: str, gen: str = "100.00", queue: int = 0, extra: str = "") -> str:
    return (f"[2026-01-01 {t}] Decode batch, #running-req: {running}, #token: {tokens}, token usage: {usage}, "
            f"{extra}cuda graph: False, gen throughput (token/s): {gen}, #queue-req: {queue}")


def prefill(t: str, seqs: int, tokens: int, running: int = 0, queue: int = 0) -> str:
    return (f"[2026-01-01 {t}] Prefill batch, #new-seq: {seqs}, #new-token: {tokens}, #cached-token: 0, "
            f"token usage: 0.01, #running-req: {running}, #queue-req: {queue}")


# -- item 7: never an impossible number -----------------------------------------------------------

def test_recompute_beyond_the_window_is_n_a_with_the_reason():
    # Two Decode lines of 2 requests holding 300000 KV tokens, one retraction of one request: the
    # recompute estimate is 1 x 300000/2 = 150000 tokens, the log computed 2 x 2 x 40 = 160 decode
    # tokens. Before: useful -149840, recompute share 93,650%, a negative arrival rate.
    doc = from_lines([
        decode("10:00:00", 2, 300000, "0.90"),
        "[2026-01-01 10:00:01] KV cache pool is full. Retract requests. #retracted_reqs: 1, #new_token_ratio: 0.3 -> 0.5",
        decode("10:00:02", 2, 300000, "0.90"),
    ])
    t = doc["throughput"]
    assert (t["computed_tokens"], t["recomputed_tokens"]) == (160, 150000)
    assert t["useful_tokens"] is None and t["recompute_share"] is None and t["useful_tokens_per_second"] is None
    assert t["not_available"]["recompute_share"].startswith("the retracted requests' work started before this log")
    assert t["verdict"]["code"] == "unknown_recompute"
    q = doc["queue_latency"]
    assert q["arrival_rate_per_second"] is None and q["admitted_requests"] is None
    out = text(doc)
    assert "useful tokens                                    n/a (the retracted requests' work started" in out
    assert "-" not in out.split("recompute share of computed tokens")[1].split("\n")[0]


def test_more_retracted_than_admitted_gives_no_negative_arrival_rate():
    # Admitted 1, queue 0 -> 0, 3 requests retracted: (1 + 0 - 3) / 2 s would be -1/s.
    doc = from_lines([
        prefill("10:00:00", 1, 100),
        decode("10:00:01", 3, 3000, "0.90"),
        "[2026-01-01 10:00:01] KV cache pool is full. Retract requests. #retracted_reqs: 3, #new_tokens_gained: 900, "
        "#new_token_ratio: 0.3 -> 0.5",
        decode("10:00:02", 1, 1000, "0.30"),
    ])
    q = doc["queue_latency"]
    assert q["admitted_requests"] == 1 and q["arrival_rate_per_second"] is None
    assert "more requests were retracted (3) than admitted (1)" in q["not_available"]["arrival_rate_per_second"]


def test_more_retractions_than_batches_is_no_share_above_one():
    doc = from_lines([prefill("10:00:00", 1, 100)] + [
        f"[2026-01-01 10:00:0{i}] KV cache pool is full. Retract requests. #retracted_reqs: 1, #new_tokens_gained: 10, "
        "#new_token_ratio: 0.3 -> 0.5" for i in range(1, 4)])
    r = doc["retractions"]
    assert r["share_of_batches"] is None and "more retraction events (3) than batches (1)" in r["not_available"]["share_of_batches"]
    assert [w["share"] for w in r["windows"]] == [None]
    assert r["verdict"]["code"] == "unknown_share"


# -- item 8: decode step time ---------------------------------------------------------------------

def test_decode_step_time_counts_same_second_lines():
    # 20 running requests, 2000 tokens/s: 100 steps/s, 10 ms a step (before: 25 ms, from the one
    # 12:00:00 -> 12:00:01 pair, the same-second pairs dropped).
    lines = [decode(t, 20, 2000, "0.10", "2000.00") for t in ("12:00:00", "12:00:00", "12:00:01", "12:00:01", "12:00:01")]
    q = from_lines(lines)["queue_latency"]
    assert q["decode_step_seconds"] == pytest.approx(0.010)
    assert (q["decode_step_source"], q["decode_step_lines"]) == ("gen throughput", 4)  # the first line starts the log
    assert q["time_per_output_token_seconds"] == pytest.approx(0.010)


def test_idle_gaps_are_not_decode_time():
    # Time stamps only (no gen throughput): 1 s between Decode lines at 12:00:00-02, then the server
    # was idle (a Prefill line with no running request at 12:00:40), then 12:00:41-42 again: 3 s over
    # 3 x 40 steps = 25 ms (the idle 39 s counted as decoding made it 262 ms).
    def line(t):
        return f"[2026-01-01 {t}] Decode batch, #running-req: 20, #token: 2000, token usage: 0.10, #queue-req: 0"
    lines = [line("12:00:00"), line("12:00:01"), line("12:00:02"), prefill("12:00:40", 1, 100, running=0),
             line("12:00:41"), line("12:00:42")]
    q = from_lines(lines)["queue_latency"]
    assert q["decode_step_seconds"] == pytest.approx(3 / 120)
    assert (q["decode_step_source"], q["decode_step_lines"]) == ("time stamps", 3)
    # With gen throughput the line after the idle period (its throughput counts the silence) is left out.
    lines = [decode("12:00:00", 20, 2000, "0.10", "2000.00"), decode("12:00:01", 20, 2000, "0.10", "2000.00"),
             prefill("12:00:40", 1, 100, running=0), decode("12:00:41", 20, 2000, "0.10", "19.50"),
             decode("12:00:42", 20, 2000, "0.10", "2000.00")]
    q = from_lines(lines)["queue_latency"]
    assert q["decode_step_seconds"] == pytest.approx(0.010) and q["decode_step_lines"] == 2
    # A PD decode server prints no Prefill line to show a pause: an interval more than 10 times the
    # median one (20 / 19.5 tokens/s: 1.03 s a step against 10 ms) held idle time and is left out.
    lines = [decode(f"12:00:0{i}", 20, 2000, "0.10", gen) for i, gen in enumerate(
        ("2000.00", "2000.00", "2000.00", "19.50", "2000.00"))]
    q = from_lines(lines)["queue_latency"]
    assert q["decode_step_seconds"] == pytest.approx(0.010) and q["decode_step_lines"] == 3
    assert q["decode_step_seconds_per_line"]["max"] == pytest.approx(0.010)


def test_pd_decode_log_decode_step_is_from_its_gen_throughput():
    # Corpus 028: 1 running request at ~78 tokens/s after an idle first line (0.04 tokens/s):
    # 1/78.20, 1/77.89, 1/77.90, 1/77.90 -> 12.8 ms (the time stamps' same-second pairs gave 25 ms).
    q = from_files(PD_DECODE)["queue_latency"]
    assert q["decode_step_seconds"] == pytest.approx((1 / 78.20 + 1 / 77.89 + 2 / 77.90) / 4)


# -- item 9: PD decode servers --------------------------------------------------------------------

PD = ("pre-allocated usage: 0.30, #prealloc-req: 0, #transfer-req: 3, #retracted-req: 0, ")


def test_pd_decode_footprint_leaves_out_pre_allocated_kv():
    # #token 300000 at token usage 0.50: a pool of 600000; 0.30 of it (180000) is pre-allocated for 3
    # requests in transfer, so 4 running requests hold 120000: 30000 each, not 75000. Capacity
    # 600000 / 30000 = 20 requests (the estimate's middle is 600060, so 20.002), safe ceiling 14,
    # offline 12-14.
    doc = from_lines([decode("10:00:00", 4, 300000, "0.50", "400.00", extra=PD),
                      decode("10:00:01", 4, 300000, "0.50", "400.00", extra=PD)])
    k = doc["kv_capacity"]
    assert k["mean_tokens_per_running_request"] == pytest.approx(30000)
    assert k["preallocated_tokens_excluded"] == pytest.approx(180000)
    assert k["capacity_requests"] == pytest.approx(20, abs=0.01)
    assert k["safe_ceiling_requests"] == 14 and k["recommended_max_running_requests_offline"] == [12, 14]
    q = doc["queue_latency"]
    assert q["arrival_rate_per_second"] is None and q["admitted_requests"] is None
    assert "PD decode server prints no Prefill lines" in q["not_available"]["arrival_rate_per_second"]
    assert "n/a (a PD decode server" in text(doc)


def test_pd_decode_with_a_start_up_line_uses_the_exact_capacity():
    cap = ("[2026-01-01 09:59:00] max_total_num_tokens=600000, chunked_prefill_size=8192, max_prefill_tokens=16384, "
           "max_running_requests=64, context_len=32768, available_gpu_mem=60.10 GB")
    k = from_lines([cap, decode("10:00:00", 4, 300000, "0.50", "400.00", extra=PD)])["kv_capacity"]
    assert k["mean_tokens_per_running_request"] == pytest.approx(30000)
    assert (k["capacity_requests"], k["safe_ceiling_requests"]) == (pytest.approx(20), 14)
    assert k["verdict"]["code"] == "ceiling_above_safe"


def test_corpus_pd_decode_log_has_no_arrival_rate():
    doc = from_files(PD_DECODE)
    assert doc["queue_latency"]["arrival_rate_per_second"] is None  # was a measured 0.00/s
    assert doc["queue_latency"]["mean_wait_seconds_littles_law"] is None


# -- item 10: hybrid pools, chunked prefill -------------------------------------------------------

def test_hybrid_capacity_is_the_smallest_pool_and_the_recommendation_stays_below_it():
    # mamba num 6 at mamba usage 0.50: a pool of 12 request states. The token pool holds
    # 600000 / (6000 / 6) = 600 requests. Capacity 12, safe 8, offline 7-8, never above 12.
    cap = ("[2025-11-01 09:59:00] max_total_num_tokens=600000, chunked_prefill_size=8192, max_prefill_tokens=16384, "
           "max_running_requests=48, context_len=32768, available_gpu_mem=60.10 GB")
    line = ("[2025-11-01 10:00:0{}] Decode batch, #running-req: 6, #full token: 6000, full token usage: 0.01, "
            "mamba num: 6, mamba usage: 0.50, cuda graph: True, gen throughput (token/s): 600.00, #queue-req: 2")
    k = from_lines([cap, line.format(0), line.format(1)])["kv_capacity"]
    assert k["capacity_requests_by_pool"]["kv"] == pytest.approx(600)
    assert k["capacity_requests_by_pool"]["mamba"] == pytest.approx(12)
    assert (k["capacity_limiting_pool"], k["capacity_requests"]) == ("mamba", 12)
    assert k["safe_ceiling_requests"] == 8 and k["recommended_max_running_requests_offline"] == [7, 8]
    assert k["recommended_max_running_requests_offline"][1] <= k["capacity_requests"]
    assert k["verdict"]["code"] == "ceiling_above_safe" and "mamba pool" in k["verdict"]["text"]


def test_swa_pool_capacity():
    # 4 running requests hold 40000 SWA tokens at swa token usage 0.50: an SWA pool of 80000, 10000
    # per request -> 8 requests; the full pool (100000 tokens, 250 per request) holds 400: SWA limits.
    cap = ("[2025-11-01 09:59:00] max_total_num_tokens=100000, chunked_prefill_size=8192, max_prefill_tokens=16384, "
           "max_running_requests=16, context_len=32768, available_gpu_mem=60.10 GB")
    line = ("[2025-11-01 10:00:00] Decode batch, #running-req: 4, #full token: 1000, full token usage: 0.01, "
            "#swa token: 40000, swa token usage: 0.50, cuda graph: True, gen throughput (token/s): 400.00, #queue-req: 0")
    k = from_lines([cap, line])["kv_capacity"]
    assert k["capacity_requests_by_pool"] == {"kv": pytest.approx(400), "swa": pytest.approx(8, abs=0.01)}
    assert k["capacity_limiting_pool"] == "swa" and k["safe_ceiling_requests"] == 5
    # Corpus 006 (swa token usage 0.06, below the 0.10 an estimate needs): the full pool, 4 requests
    # at full token usage 1.00 (#full token 2642688 = the whole pool), decides.
    k = from_files(CORPUS / "006-swa-full-token-usage-retraction.log")["kv_capacity"]
    assert k["capacity_limiting_pool"] == "kv" and k["capacity_requests"] == pytest.approx(4, abs=0.05)


SIX_CHUNKS = [prefill(f"10:00:0{i}", 1, 8192 if i < 5 else 1234) for i in range(6)]


def test_without_a_chunk_size_admissions_are_the_states_and_say_the_size_is_unknown(tmp_path, capsys):
    # The state guesses no chunk size (one admission rule, exporter/scheduler/rules.py): without one each
    # continuing chunk counts again, as in --one-shot, and the report says why; with the size, one request.
    q = from_lines(SIX_CHUNKS)
    assert q["queue_latency"]["admitted_requests"] == 6
    assert "no chunked_prefill_size" in q["queue_latency"]["admitted_requests_source"]
    assert q["settings"]["chunked_prefill_size"] is None and q["settings"]["chunked_prefill_size_source"] is None
    log = tmp_path / "six.log"
    log.write_text("\n".join(SIX_CHUNKS) + "\n")
    assert cli.main(["report", "--format", "json", "--chunked-prefill-size", "8192", str(log)]) == 0
    q = json.loads(capsys.readouterr().out)["queue_latency"]
    assert q["admitted_requests"] == 1
    assert q["admitted_requests_source"] == "scheduler state (sglang_scheduler_admitted_requests_total)"


def test_a_decode_line_between_two_full_prefills_ends_the_chunk():
    # Real SGLang Omni 0.1.9 talker_ar (corpus 064): the warm-up's 41-token prefill, then decode, and
    # much later a batch of two prompts of 41 tokens together. SGLang runs a chunked request's next
    # chunk in the very next batch, so a Decode line between the two says neither is a chunk: 5
    # admissions, not 4, and no chunk size is inferred.
    lines = [prefill("10:00:00", 1, 41), decode("10:00:01", 1, 42, "0.01"), decode("10:00:02", 1, 43, "0.01"),
             prefill("10:00:05", 1, 18), prefill("10:00:05", 1, 19, running=1), decode("10:00:06", 2, 40, "0.01"),
             prefill("10:00:07", 2, 41, running=2)]
    q = from_lines(lines)
    assert q["queue_latency"]["admitted_requests"] == 5
    assert q["settings"]["chunked_prefill_size"] is None


def test_two_prompts_of_one_length_are_not_chunks():
    # Corpus 008: two Prefill lines of 351 tokens each; the queue fell by one at each: two admissions.
    doc = from_files(STORM)
    assert doc["queue_latency"]["admitted_requests"] == 2 and doc["settings"]["chunked_prefill_size"] is None


def test_chunked_prefill_size_option(tmp_path, capsys):
    log = tmp_path / "chunks.log"
    # Only the option can say the size: without it every #new-seq counts (1 + 1 + 2).
    log.write_text("\n".join([prefill("10:00:00", 1, 4096), prefill("10:00:01", 1, 4096),
                              prefill("10:00:02", 2, 3000, queue=0)]) + "\n")
    assert cli.main(["report", "--format", "json", str(log)]) == 0
    assert json.loads(capsys.readouterr().out)["queue_latency"]["admitted_requests"] == 4
    assert cli.main(["report", "--format", "json", "--chunked-prefill-size", "2048", str(log)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["queue_latency"]["admitted_requests"] == 2
    assert doc["settings"]["chunked_prefill_size_source"] == "--chunked-prefill-size"
    for bad in ("0", "-1", "10000001"):
        assert cli.main(["report", "--chunked-prefill-size", bad, str(log)]) == ExitStatus.USAGE
        assert "--chunked-prefill-size" in capsys.readouterr().err


# -- item 11: words and units ---------------------------------------------------------------------

def test_words_and_units():
    out = text(from_files(PD_DECODE))
    assert "n/a/s" not in out and "n/a s" not in out and "schedulers (DP ranks)" not in out
    assert "; schedulers: 1\n" in out
    one = text(from_lines([decode("10:00:00", 1, 500, "0.50"), decode("10:00:01", 1, 500, "0.50"),
                           "[2026-01-01 10:00:02] KV cache pool is full. Retract requests. #retracted_reqs: 1, "
                           "#new_tokens_gained: 10, #new_token_ratio: 0.3 -> 0.5"]))
    assert "Bounded by KV memory: 1 retraction," in one
    # 500 tokens per request in a pool of ~1000: 2 requests, safe 1, offline 1 (was "1-1").
    assert "recommended --max-running-requests, offline (60-70%)  1\n" in one
    dp = text(from_files(CORPUS / "024-dp-attention-mtp-dp-tp-tags.log"))
    assert "schedulers: 5 (DP ranks 0, 2, 5, 6, 7)" in dp


NO_TIME_STAMPS = {"005", "021", "023", "034", "053"}


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name[:3])
def test_time_stamped_lines_are_recognised_in_every_corpus_log(path):
    span = from_files(path)["span"]
    assert span["timestamps"] is (path.name[:3] not in NO_TIME_STAMPS)


def test_time_stamps_of_lines_that_are_not_scheduler_lines():
    # Hand-read first and last stamps: 042 uvicorn access lines, 050 SGLang Omni "YYYY-MM-DD HH:MM:SS,mmm",
    # 045 the router's Rust tracing format, 006 a lost "[", 037 the 2024 time-only "[HH:MM:SS TP0]".
    for name, first, last in (("042", "2025-08-11 21:13:51", "2025-08-11 21:14:04"),
                              ("050", "2026-03-14 12:11:55", "2026-03-14 12:11:56"),
                              ("045", "2026-02-19 13:32:18", "2026-02-19 13:32:42"),
                              ("006", "2026-05-24 03:51:44", "2026-05-24 03:51:45"),
                              ("037", "16:43:29.000", "16:43:33.000")):
        span = from_files(next(CORPUS.glob(f"{name}-*.log")))["span"]
        assert (span["first"], span["last"]) == (first, last), name


def test_idle_gaps_are_capped_as_in_the_exporter():
    # Decode lines at 10:00:00, 10:00:01, then an hour of silence, 11:00:01, 11:00:02: the active
    # time is 1 + 60 + 1 = 62 s (the exporter's queue integral caps the same gap at 60 s), not 3602 s.
    lines = [decode("10:00:00", 2, 200, "0.10", queue=1), decode("10:00:01", 2, 200, "0.10", queue=1),
             decode("11:00:01", 2, 200, "0.10", queue=1), decode("11:00:02", 2, 200, "0.10", queue=1)]
    doc = from_lines(lines)
    assert (doc["span"]["active_seconds"], doc["span"]["idle_gaps"], doc["span"]["stats_seconds"]) == (62, 1, 3602)
    assert doc["throughput"]["seconds"] == 62
    assert doc["throughput"]["computed_tokens_per_second"] == pytest.approx(4 * 2 * 40 / 62)
    assert doc["queue_latency"]["queue_request_seconds"] == pytest.approx(62)
    assert doc["queue_latency"]["time_weighted_mean_depth"] == pytest.approx(1.0)  # 62 request-s / 62 s


def test_baseline_shows_shares_as_percentages_and_their_change_in_points():
    cmp = compare(from_files(STARTUP), from_files(STORM))
    rows = {r["key"]: r for r in cmp["figures"]}
    share = rows["retractions.share_of_batches"]
    assert share["kind"] == "share" and share["change_points"] == pytest.approx(9 / 562)
    out = text(cmp)
    line = next(x for x in out.splitlines() if x.strip().startswith("retraction share of batches"))
    assert "0.00%" in line and "1.60%" in line and "+1.60 pp" in line and "<- worse" in line
    line = next(x for x in out.splitlines() if x.strip().startswith("KV usage p90"))
    assert "4.00%" in line and "100.00%" in line and "+96.00 pp" in line
    line = next(x for x in out.splitlines() if x.strip().startswith("decode batch p50"))
    assert "+1220.0%" in line and "pp" not in line  # 5 -> 66: a relative change


def test_expect_on_a_log_that_cannot_show_the_parameter_says_so(capsys):
    # 008 has no start-up line at all: nothing can be checked, and nothing "did not take effect".
    doc = from_files(STORM, expect={"max_running_requests": "64", "schedule_policy": "'lpm'"})
    assert [c["status"] for c in doc["startup"]["expected"]] == ["unchecked", "unchecked"]
    v = doc["startup"]["verdict"]
    assert v["code"] == "unchecked" and "cannot show" in v["text"] and "did not take effect" not in v["text"]
    assert "found None" not in text(doc)
    # 009 has the capacity line: max_running_requests is checked against it.
    st = from_files(STARTUP, expect={"max_running_requests": "2048", "schedule_policy": "'lpm'"})["startup"]
    assert [(c["status"], c["source"]) for c in st["expected"]] == [("ok", "capacity line"), ("unchecked", None)]
    st = from_files(STARTUP, expect={"max_running_requests": "64"})["startup"]
    assert st["verdict"]["code"] == "mismatch" and st["expected"][0]["found"] == "2048"


@pytest.fixture
def unreadable(tmp_path, monkeypatch):
    """A file the process cannot open: chmod 000, or (as root, who may read anything) an open that fails."""
    path = tmp_path / "secret.log"
    path.write_text(STORM.read_text())
    path.chmod(0)
    if os.geteuid() == 0:
        real = os.open

        def deny(p, *a, **kw):
            if os.fspath(p) == str(path):
                raise PermissionError(13, "Permission denied", str(path))
            return real(p, *a, **kw)
        monkeypatch.setattr(os, "open", deny)
    yield path
    path.chmod(0o600)


def test_both_commands_answer_a_bad_path_alike(tmp_path, capsys, unreadable):
    # One helper (exporter.paths.file_problem) words the problem for both; each names its own setting.
    cases = {"missing": (tmp_path / "missing.log", "does not exist"),
             "directory": (tmp_path, f"is a directory: give a file, or a glob such as '{tmp_path}/*.log'"),
             "unreadable": (unreadable, "cannot be read (Permission denied)")}
    for name, (path, problem) in cases.items():
        assert cli.main(["report", str(path)]) == ExitStatus.USAGE, name
        report_err = capsys.readouterr().err.strip()
        assert cli.main(["--log.path", str(path), "--one-shot"]) == ExitStatus.USAGE, name
        one_shot_err = capsys.readouterr().err.strip()
        assert report_err == f"sglang-exporter report: error: argument LOG: {str(path)!r} {problem}"
        assert one_shot_err.startswith("sglang-exporter: error: setting log.path (--log.path")
        assert f"{str(path)!r} {problem}" in one_shot_err and len(one_shot_err.splitlines()) == 1


def test_bad_paths_through_the_real_commands(tmp_path):
    for path, problem in ((tmp_path / "missing.log", "does not exist"),
                          (tmp_path, f"is a directory: give a file, or a glob such as '{tmp_path}/*.log'")):
        for args in (["report", str(path)], ["--log.path", str(path), "--one-shot"]):
            proc = subprocess.run([sys.executable, "-m", "exporter", *args], capture_output=True, text=True, timeout=60)
            assert proc.returncode == ExitStatus.USAGE and f"{str(path)!r} {problem}" in proc.stderr
            assert len(proc.stderr.strip().splitlines()) == 1


# -- issue 11 item 4: a file with no scheduler line -----------------------------------------------

@pytest.mark.parametrize("content, lines", [(b"", "the file is empty"),
                                            (ACCESS_LOG.read_bytes(), "9 lines read"),
                                            # the sidecar's splitter: a bare \r separates lines too
                                            (bytes(range(256)) * 40, "81 lines read")])
def test_no_scheduler_line_warns_and_exits_3(tmp_path, content, lines):
    path = tmp_path / "input.log"
    path.write_bytes(content)
    proc = subprocess.run([sys.executable, "-m", "exporter", "report", str(path)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == ExitStatus.NO_SCHEDULER_LINES == 3
    assert proc.stderr.strip() == f"sglang-exporter report: warning: no SGLang scheduler line in {str(path)!r} ({lines})"
    assert proc.stdout.startswith("SGLang performance report")  # the report is printed all the same


def test_a_run_with_scheduler_lines_is_not_flagged_for_one_empty_segment(tmp_path, capsys):
    empty = tmp_path / "empty.log"
    empty.write_text("")
    assert cli.main(["report", str(STORM), str(empty)]) == ExitStatus.OK
    assert "no SGLang scheduler line in" in capsys.readouterr().err
    assert cli.main(["report", "--baseline", str(empty), str(STORM)]) == ExitStatus.NO_SCHEDULER_LINES


def test_help_documents_the_exit_statuses(capsys):
    assert cli.main(["report", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "3 no SGLang scheduler line in the input" in out and "2 bad arguments" in out


# -- item 3: the 2026 KV-allocation wording -------------------------------------------------------

KV_2026 = ("[2026-07-10 11:00:00 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 500000, "
           "K size: 7.63 GB, V size: 7.63 GB")


def test_2026_kv_allocation_line_gives_the_capacity_and_the_cross_check():
    # No start-up capacity line (SGLang Omni never prints one): the capacity is the line's 500000
    # tokens; 10 running requests of 5000 tokens each -> 100 requests, safe 70.
    doc = from_lines([KV_2026, decode("11:00:01", 10, 50000, "0.10").replace("2026-01-01", "2026-07-10")],
                     model_config={"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                                   "head_dim": 128, "torch_dtype": "bfloat16"})
    k = doc["kv_capacity"]
    assert (k["capacity_tokens"], k["capacity_source"]) == (500000, "KV Cache is allocated line")
    assert k["capacity_requests"] == pytest.approx(100) and k["safe_ceiling_requests"] == 70
    m = k["model"]
    # 2 x 32 layers x 8 KV heads x 128 x 2 B = 131072 B per token; 500000 tokens = 61.04 GiB; the line says 15.26.
    assert m["bytes_per_token"] == 131072
    assert (m["log_kv_alloc_tokens"], m["log_kv_alloc_gib"]) == (500000, pytest.approx(15.26))
    assert m["log_vs_model_ratio"] == pytest.approx(15.26 / (500000 * 131072 / 2**30))


def test_start_up_line_wins_over_the_kv_allocation_line():
    cap = ("[2026-07-10 10:59:00] max_total_num_tokens=480000, chunked_prefill_size=8192, max_prefill_tokens=16384, "
           "max_running_requests=64, context_len=32768, available_gpu_mem=60.10 GB")
    k = from_lines([KV_2026, cap])["kv_capacity"]
    assert (k["capacity_tokens"], k["capacity_source"]) == (480000, "start-up line")


# -- issue 24: no figure contradicts the bounds its own log gives, no word contradicts a figure ------

def test_wait_longer_than_the_log_is_not_a_steady_wait():
    # a queue that drains from 51 to 2 with one visible admission (an excerpt with gaps): Little's law
    # would give a wait far longer than the 23-s log; it is n/a and the queue is not called steady
    lines = [decode(f"10:00:{s:02d}", 8, 800, "0.10", queue=q) for s, q in ((0, 51), (10, 50), (20, 49))]
    lines += [prefill("10:00:21", 1, 100, queue=3), decode("10:00:23", 8, 800, "0.10", queue=2)]
    q = from_lines(lines)["queue_latency"]
    assert q["admitted_requests"] == 1 and q["queue_request_seconds"] > 23
    assert q["mean_wait_seconds_littles_law"] is None
    assert "longer than the log" in q["not_available"]["mean_wait_seconds_littles_law"]
    assert q["steady_state"] is False and q["verdict"]["code"] != "steady"


def test_decode_step_no_longer_than_the_time_between_two_decode_lines():
    # gen throughput 0.50 with 13 running requests says 26 s a step; the previous Decode line, 40 steps
    # earlier, is 2 s before: that line breaks the log's bound and is left out; slow steps within
    # the bound all count (no filter against the median: issue 23's 172 real slow steps)
    lines = [decode("10:00:00", 13, 900, "0.10", gen="520.00"), decode("10:00:01", 13, 900, "0.10", gen="520.00"),
             decode("10:00:03", 13, 900, "0.10", gen="0.50"),
             decode("10:00:30", 13, 900, "0.10", gen="26.00")]  # 0.5 s a step, 27 s after the previous line
    q = from_lines(lines)["queue_latency"]
    assert q["decode_step_lines"] == 2  # the first line starts the log (its interval is unseen)
    assert q["decode_step_seconds"] == pytest.approx((0.025 + 0.5) / 2)
    assert q["decode_step_seconds_per_line"]["max"] == pytest.approx(0.5)


def test_omni_lines_without_a_stage_are_said_as_such(tmp_path, capsys):
    # the real SGLang Omni start-up lines of corpus 050 (no stage is named SGLang-backed), then five
    # scheduler lines under Omni's logging format: unattributed, for the reason the attribution gives
    omni = CORPUS / "050-sglang-omni-python-logging-comma-ms-bracket-level.log"
    head = [line for line in omni.read_text().splitlines() if not line.startswith("# ")]
    lines = head + [f"2026-03-14 12:12:0{i},100 [INFO] sglang.srt.managers.scheduler: Decode batch, #running-req: 4, "
                    "#token: 900, token usage: 0.01, cuda graph: True, gen throughput (token/s): 100.00, "
                    "#queue-req: 0" for i in range(5)]
    path = tmp_path / "omni.log"
    path.write_text("\n".join(lines) + "\n")
    assert cli.main(["report", str(path)]) == ExitStatus.OK
    out, err = capsys.readouterr()
    assert "5 SGLang Omni lines and none attributed to a stage" in err
    assert "no SGLang scheduler line" not in err
    assert "no start-up line of SGLang Omni named its SGLang-backed stage" in out
    assert "several stages" not in out.split("6. Are several priorities")[0]
    assert "2026-03-14 12:11:55" in out and "no time stamps" not in out and "no timestamps" not in out


def test_a_tiny_log_concludes_no_regime_and_no_never():
    doc = from_lines([prefill("10:00:00", 1, 20), "[2026-01-01 10:00:00] INFO: started",
                      "[2026-01-01 10:00:01] INFO: ok", "[2026-01-01 10:00:02] INFO: done"])
    assert doc["scenario"]["verdict"]["code"] == "unknown"
    assert "Latency-first" not in doc["scenario"]["verdict"]["text"]
    assert "never ran out" not in doc["retractions"]["verdict"]["text"]


def test_capacity_of_several_dp_ranks_says_per_rank():
    k = from_files(CORPUS / "024-dp-attention-mtp-dp-tp-tags.log")["kv_capacity"]
    assert (k["dp_ranks"], k["capacity_scope"]) == (8, "per DP rank")  # tags DP0..DP7, 5 printing
    assert "per DP rank" in k["verdict"]["text"]
    assert "per DP rank (8 ranks)" in text(from_files(CORPUS / "024-dp-attention-mtp-dp-tp-tags.log"))


def test_an_omni_log_without_server_args_gets_omnis_advice_and_the_assumed_interval_is_said(capsys):
    """A real SGLang Omni 0.1.9 log (corpus 064) never has server_args: the report no longer tells
    its user to restart at --log-level info (Omni prints none at any level) but names the setting
    that can say; without it the batches row says the decode figures rest on an assumed interval."""
    omni = next(p for p in corpus_files() if p.name.startswith("064-real-omni"))
    assert cli.main(["report", str(omni)]) == 0
    out = capsys.readouterr().out
    assert "--log-level info and keep the start-up lines" not in out
    assert out.count("SGLang Omni prints none at any log level") >= 1
    assert "Decode lines x 40, assumed: SGLang's default" in out
    assert cli.main(["report", "--stage-decode-log-intervals", "thinker=1,talker_ar=1", str(omni)]) == 0
    out = capsys.readouterr().out
    assert "assumed" not in out.split("Decode lines x 1")[1][:40]
    plain = next(p for p in corpus_files() if p.name.startswith("001"))
    assert cli.main(["report", str(plain)]) in (0, 3)
    assert "--log-level info and keep the start-up lines" in capsys.readouterr().out
