"""Monitoring as code for sglang-exporter: recording rules, alerts and Grafana dashboards.

Layout (kubernetes-mixin's, in Python):

* ``config.py``: every threshold, ``for:`` duration, window, label and the runbook URL base;
* ``promql.py``: the shared PromQL pieces (the ``sglang_group`` replica idiom written once) and wording;
* ``recording.py`` / ``alerts.py``: the rule groups; ``rulefile.py`` writes them as YAML;
* ``dashboards/``: one module per Grafana dashboard on Grafana's foundation SDK;
* ``__main__.py``: ``python3 -m monitoring`` writes everything (see ``--help``).

Generated and committed: ``deploy/prometheus/sglang-{recording-rules,alerts}.yml``,
``grafana/sglang-{scheduler,gpu,capacity}.json`` and, through ``deploy/generate.py``, their Kubernetes
wrappers. The tests fail while a committed file differs from what this package gives.
"""

from __future__ import annotations

from . import alerts, dashboards, recording
from .config import DEFAULT, Config
from .rulefile import render

RULES_DIR = "deploy/prometheus"
DASHBOARDS_DIR = "grafana"


def rule_files(cfg: Config = DEFAULT) -> dict[str, str]:
    """``{file name: YAML text}`` of the two Prometheus rule files."""
    return {"sglang-recording-rules.yml": render(cfg, recording.header(cfg), recording.groups(cfg)),
            "sglang-alerts.yml": render(cfg, alerts.header(cfg), alerts.groups(cfg))}


def outputs(cfg: Config = DEFAULT) -> dict[str, str]:
    """``{path relative to the repository root: text}`` of every generated rule file and dashboard."""
    out = {f"{RULES_DIR}/{name}": text for name, text in rule_files(cfg).items()}
    out.update({f"{DASHBOARDS_DIR}/{name}": text for name, text in dashboards.build(cfg).items()})
    return out
