"""The Grafana dashboards: generated, valid, conventional, and reading only metrics that exist.

* the committed JSON equals ``grafana/build_dashboards.py``'s output;
* valid JSON, stable unique uids, the datasource/namespace/pod and dp_rank (or gpu) variables;
* every panel has the ``${datasource}`` variable as data source (panel and targets), a unit and a
  description; every rate/increase uses ``$__rate_interval``;
* every expression parses (``promtool check rules`` on the expressions with the variables filled in)
  and every metric it reads is in the real exporter's output; recording rules it reads exist.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess

import pytest
import yaml
from conftest import ROOT
from test_rules import RULE_FILES, check_references

GRAFANA = ROOT / "grafana"
FILES = sorted(GRAFANA.glob("*.json"))
UIDS = {"sglang-scheduler.json": "sglang-scheduler", "sglang-gpu.json": "sglang-gpu",
        "sglang-capacity.json": "sglang-capacity"}
#: Values the variables take when an expression is checked outside Grafana.
FILL = {"$__rate_interval": "1m", "$safety_factor": "0.7", "$namespace": ".*", "$pod": ".*",
        "$dp_rank": ".*", "$gpu": ".*"}


def _dashboards() -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in FILES}


def _panels(d: dict):
    for p in d["panels"]:
        if p["type"] != "row":
            yield p
        yield from (q for q in p.get("panels", []) if q["type"] != "row")


def _exprs():
    for name, d in _dashboards().items():
        for p in _panels(d):
            for t in p["targets"]:
                yield f"{name}: {p['title']} [{t['refId']}]", t["expr"]


def fill(expr: str) -> str:
    for var, val in sorted(FILL.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace(var, val)
    assert "$" not in expr, expr
    return expr


def test_committed_json_is_the_builders_output():
    spec = importlib.util.spec_from_file_location("build_dashboards", GRAFANA / "build_dashboards.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    built = module.build()
    assert sorted(built) == [p.name for p in FILES]
    for p in FILES:
        assert p.read_text() == built[p.name], f"{p.name} is stale: run python grafana/build_dashboards.py"


def test_stable_unique_uids_and_variables():
    boards = _dashboards()
    assert {name: d["uid"] for name, d in boards.items()} == UIDS
    for name, d in boards.items():
        variables = {v["name"]: v for v in d["templating"]["list"]}
        assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
        need = {"namespace", "pod", "gpu" if name == "sglang-gpu.json" else "dp_rank"}
        assert need <= set(variables), name
        for v in need:
            assert variables[v]["datasource"]["uid"] == "${datasource}", (name, v)
            assert variables[v]["includeAll"] and variables[v]["allValue"] == ".*", (name, v)
        assert d["title"].startswith("SGLang / ") and d["description"]
    cap = {v["name"]: v for v in boards["sglang-capacity.json"]["templating"]["list"]}
    assert cap["safety_factor"]["current"]["value"] == "0.7"


def test_every_panel_has_datasource_unit_and_description():
    for name, d in _dashboards().items():
        ids = [p["id"] for p in d["panels"]]
        assert len(ids) == len(set(ids)), name
        for p in _panels(d):
            where = f"{name}: {p['title']}"
            assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, where
            assert p["targets"], where
            assert all(t["datasource"]["uid"] == "${datasource}" for t in p["targets"]), where
            assert p["fieldConfig"]["defaults"].get("unit"), where
            assert len(p.get("description", "")) > 20, where


def test_rates_use_rate_interval():
    for where, expr in _exprs():
        for m in re.finditer(r"\b(rate|increase|irate)\((.*?)\[([^\]]+)\]", expr):
            assert m.group(3) == "$__rate_interval", f"{where}: {m.group(0)}"


def test_the_scheduler_dashboard_answers_the_method():
    titles = {p["title"] for p in _panels(_dashboards()["sglang-scheduler.json"])}
    for needed in ("Decode batch size percentiles vs the configured ceiling", "Decode batch size distribution",
                   "Retraction ratio vs the 5% line", "KV cache usage", "Recompute share (\"fake throughput\")",
                   "Effective throughput", "Queue depth", "Queue wait", "Cache-hit ratio",
                   "Speculative accept length", "PD queues"):
        assert needed in titles
    ratio = next(p for p in _panels(_dashboards()["sglang-scheduler.json"]) if p["title"] == "Retraction ratio vs the 5% line")
    assert [s["value"] for s in ratio["fieldConfig"]["defaults"]["thresholds"]["steps"]] == [None, 0.05]


def test_every_expression_parses(promtool, tmp_path):
    rules = [{"record": f"dashboard_expr_{i}", "expr": fill(expr)} for i, (_, expr) in enumerate(_exprs())]
    path = tmp_path / "dashboard-exprs.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    r = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_metric_a_panel_reads_is_exported():
    recorded = {r["record"] for p in RULE_FILES for g in yaml.safe_load(p.read_text())["groups"]
                for r in g["rules"] if "record" in r}
    problems = []
    for where, expr in _exprs():
        problems += check_references(where, expr)
        for name in re.findall(r"[a-z_]+:[a-z0-9_]+:[a-z0-9_]+", expr):
            if name not in recorded:
                problems.append(f"{where}: recording rule {name} does not exist")
    assert not problems, "\n".join(problems)


def test_file_provisioning():
    provider = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "sglang.yaml").read_text())
    assert provider["apiVersion"] == 1
    (p,) = provider["providers"]
    assert p["type"] == "file" and p["options"]["path"]
    ds = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "prometheus.yaml").read_text())
    assert ds["datasources"][0]["type"] == "prometheus"


@pytest.mark.parametrize("name", sorted(UIDS))
def test_dashboard_json_is_valid(name):
    d = json.loads((GRAFANA / name).read_text())
    assert d["schemaVersion"] >= 36 and isinstance(d["panels"], list)
