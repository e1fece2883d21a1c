"""Issue 12 item 7: the report never prints an impossible number.

Every figure of the JSON document has a declared domain (counts, tokens, rates >= 0; shares in
[0, 1]); a figure the input cannot give is ``null`` with a one-line reason in its section's
``not_available`` map. Checked on every corpus log, on pairs of them read as one run, and on fuzzed
logs (corpus lines with their numbers replaced, cut, spliced, duplicated, shuffled, their time stamps
rewritten out of order or time-only), with the last-resort guard of the schema switched off: the
sections themselves must keep every figure in its domain.
"""

from __future__ import annotations

import ast
import json
import random
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from exporter.report.domains import COUNT, SHARE, UNEXPECTED, Domain, Figures, Range, violations as spec_violations
from exporter.report.schema import FIGURE_SECTIONS, TOP_KEYS, enforce, jsonable, violations
from exporter.report.text import text

from conftest import CORPUS, ROOT, corpus_files
from report_support import report_files, report_lines


def missing_reasons(doc: dict) -> list[str]:
    """Figures that are n/a without a reason."""
    out = []
    for name, domains in FIGURE_SECTIONS.items():
        sec = doc[name]
        for key, spec in domains.items():
            if isinstance(spec, (Domain, Range)) and sec.get(key) is None and not sec["not_available"].get(key):
                out.append(f"{name}.{key}")
    return out


def check(doc: dict) -> None:
    assert violations(doc) == []
    assert missing_reasons(doc) == []
    for name in FIGURE_SECTIONS:
        for key, why in doc[name]["not_available"].items():
            assert doc[name][key] is None, (name, key, why)
            assert not why.startswith(UNEXPECTED) and "\n" not in why
    assert list(doc) == list(TOP_KEYS)
    out = text(doc)
    for bad in ("n/a/s", "n/a s", "found None", " 1 retractions", "(DP ranks): 0", "None"):
        assert bad not in out, bad
    json.dumps(jsonable(doc), allow_nan=False)


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.name[:3])
def test_every_corpus_log_keeps_every_figure_in_its_domain(path):
    check(report_files(path))


def test_corpus_logs_read_as_one_run_keep_their_domains():
    files = corpus_files()
    for a, b in zip(files, files[1:] + files[:1]):
        check(report_files(a, b))


# -- fuzzed logs ----------------------------------------------------------------------------------

def _corpus_lines() -> list[str]:
    out = []
    for p in sorted(CORPUS.glob("*.log")):
        out += [ln for ln in p.read_text(errors="replace").splitlines() if ln and not ln.startswith("#")]
    return out


#: Corpus lines plus the kinds the corpus lacks, in SGLang's printed forms (docs/log-format.md).
LINES = _corpus_lines() + [
    "[2026-07-10 11:00:00 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 500000, K size: 7.63 GB, V size: 7.63 GB",
    "[2026-03-02 14:44:10 TP0] Decode batch, #running-req: 4, #token: 300000, token usage: 0.50, pre-allocated usage: 0.30, "
    "#prealloc-req: 0, #transfer-req: 3, #retracted-req: 0, cuda graph: True, gen throughput (token/s): 400.00, #queue-req: 0",
    "[2025-11-01 10:00:00] Decode batch, #running-req: 6, #full token: 9000, full token usage: 0.10, mamba num: 6, "
    "mamba usage: 0.50, cuda graph: True, gen throughput (token/s): 600.00, #queue-req: 2",
    "[2026-05-10 10:00:00 TP0] ReqTimeStats(rid=r1, input_len=100, cached_input_len=0, output_len=20, type=unified): "
    "queue_duration=10.00ms, forward_duration=5.00ms, entry_time=1.0",
    "[2026-09-13 16:05:00] server_args=ServerArgs(tp_size=2, chunked_prefill_size=2048, max_running_requests=64, "
    "decode_log_interval=40)",
    "[2026-09-13 16:05:01] max_total_num_tokens=87552, chunked_prefill_size=2048, max_prefill_tokens=16384, "
    "max_running_requests=2048, context_len=32768, available_gpu_mem=60.10 GB",
    "[2026-09-13 16:05:02] KV cache pool is full. Retract requests. #retracted_reqs: 1, #new_token_ratio: 0.1 -> 0.3",
]
NUMBERS = ["0", "1", "2", "7", "40", "0.00", "0.01", "0.50", "0.99", "1.00", "1.01", "2.5", "300000", "87552",
           "999999999999999", "1000000000000000", "-1", "1e309", "nan"]
_NUM = re.compile(r"\d+(?:\.\d+)?")
_STAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")


def _mutate(line: str, r: random.Random) -> list[str]:
    op = r.randrange(8)
    if op == 0:  # numbers replaced
        return [_NUM.sub(lambda m: r.choice(NUMBERS) if r.random() < 0.5 else m.group(0), line)]
    if op == 1:  # time stamp moved (out of order, across midnight, far away)
        t = f"20{r.randrange(24, 27)}-0{r.randrange(1, 10)}-1{r.randrange(10)} {r.randrange(24):02d}:{r.randrange(60):02d}:{r.randrange(60):02d}"
        return [_STAMP.sub(t, line)]
    if op == 2:  # time-only prefix
        return [_STAMP.sub(lambda m: m.group(0)[11:], line)]
    if op == 3:  # cut
        return [line[: r.randrange(len(line) + 1)]]
    if op == 4:  # spliced with another line
        other = r.choice(LINES)
        return [line[: r.randrange(len(line) + 1)] + other[r.randrange(len(other) + 1):]]
    if op == 5:  # duplicated
        return [line] * r.randrange(2, 5)
    return [line]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False), st.integers(1, 60), st.sampled_from([10.0, 1.0, 0.001]))
def test_fuzzed_logs_keep_every_figure_in_its_domain(r, n, window):
    start = r.randrange(len(LINES))
    if r.random() < 0.5:  # an excerpt of neighbouring lines, mutated
        base = LINES[start:start + n]
    else:  # lines from anywhere, shuffled
        base = [r.choice(LINES) for _ in range(n)]
    lines = [m for line in base for m in _mutate(line, r)]
    if r.random() < 0.3:
        r.shuffle(lines)
    check(report_lines(lines, window=window))


# -- the domains themselves -----------------------------------------------------------------------

def test_figures_turn_an_impossible_value_into_n_a_with_the_reason():
    f = Figures({"useful": COUNT, "share": SHARE})
    assert f.set("useful", -5, "the work started before this log") is None
    assert f.set("share", 380.0, "the work started before this log") is None
    assert f.set("share", 0.25, "unused") == 0.25
    out = f.done()
    assert out["useful"] is None and out["not_available"] == {"useful": "the work started before this log"}
    with pytest.raises(KeyError):
        f.set("undeclared", 1)


def test_domains_reject_what_is_impossible():
    assert COUNT.problem(-1) and COUNT.problem(1.5) and COUNT.problem(float("nan")) and COUNT.problem(True)
    assert SHARE.problem(1.0000001) and SHARE.problem(-0.1) and SHARE.problem(float("inf"))
    assert COUNT.problem(0) is None and SHARE.problem(1) is None and COUNT.problem(None) is None
    assert spec_violations([3, 2], Range(COUNT)) == [((), [3, 2], "low above high")]


def test_the_guard_replaces_a_value_outside_its_domain_and_says_so():
    doc = report_files(CORPUS / "008-retraction-storm-tokens-gained-uvicorn.log")
    doc["throughput"]["recompute_share"] = 3.8
    doc["batch_size"]["decode"]["p50"] = -1
    assert len(violations(doc)) == 2
    assert enforce(doc) == 2 and violations(doc) == []
    assert doc["throughput"]["recompute_share"] is None and doc["batch_size"]["decode"]["p50"] is None
    assert doc["throughput"]["not_available"]["recompute_share"].startswith(UNEXPECTED)
    assert doc["batch_size"]["not_available"]["decode.p50"].startswith(UNEXPECTED)


def test_every_key_of_the_document_has_a_declared_domain():
    doc = report_files(CORPUS / "008-retraction-storm-tokens-gained-uvicorn.log")
    doc["throughput"]["new_figure"] = 1
    assert [(p, why) for p, _, why in violations(doc)] == [("throughput.new_figure", "a key without a declared domain")]


# -- item 12: a package without an import circle --------------------------------------------------

def _imports(path: Path, package: str) -> set[str]:
    """Modules of ``package`` that a module of it imports (relative or absolute)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:
                base = package + ("." + node.module if node.module else "")
                if node.module:
                    out.add(base)
                else:
                    out |= {f"{package}.{a.name}" for a in node.names}
            elif node.level == 0 and node.module and node.module.startswith(package):
                out.add(node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith(package)}
    return out


def test_the_report_package_has_no_import_circle():
    pkg = ROOT / "exporter" / "report"
    modules = {f"exporter.report.{p.stem}": p for p in pkg.glob("*.py") if p.stem != "__init__"}
    graph = {m: {d for d in _imports(p, "exporter.report") if d in modules} for m, p in modules.items()}
    for m, p in modules.items():  # no module imports the package's __init__
        assert "exporter.report" not in _imports(p, "exporter.report") - set(modules), m
    seen: dict[str, int] = {}

    def visit(m, stack):
        assert m not in stack, " -> ".join(stack + [m])
        if seen.get(m):
            return
        for d in graph[m]:
            visit(d, stack + [m])
        seen[m] = 1

    for m in graph:
        visit(m, [])
    # The parser, state and pipeline names are imported in one module only (a move is a one-line fix).
    upstream = {m for m, p in modules.items()
                if re.search(r"from \.\.(parser|state|pipeline|events)\b", p.read_text())}
    assert upstream == {"exporter.report.upstream"}
    assert not any(len(p.read_text().splitlines()) > 400 for p in modules.values())
