"""The Kubernetes Job example of ``sglang-exporter sweep`` for a GPU node
(``deploy/kubernetes/sweep-job/job.yaml``): a valid Job of the pinned Kubernetes versions (strict
schemas, as the kustomizations' test does), and a sweep command that the command's own parser and
checks accept (only the trace, mounted in the cluster, is missing here)."""

from __future__ import annotations

import shlex

import yaml

from conftest import ROOT
from exporter.sweep.cli import _check, build_parser, plan_of
from kubernetes_support import KUSTOMIZATIONS

JOB = ROOT / "deploy" / "kubernetes" / "sweep-job" / "job.yaml"


def _job() -> dict:
    (obj,) = list(yaml.safe_load_all(JOB.read_text()))
    return obj


def test_the_job_validates_against_the_pinned_kubernetes_schemas():
    import kubernetes_validate

    versions = sorted({v for vs in KUSTOMIZATIONS.values() for v in vs})
    assert versions
    for version in versions:
        kubernetes_validate.validate(_job(), version, strict=True)
    spec = _job()["spec"]
    assert spec["backoffLimit"] == 0 and spec["activeDeadlineSeconds"] > 0
    (container,) = spec["template"]["spec"]["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1


def test_the_jobs_sweep_command_is_accepted_by_the_sweep_parser(tmp_path):
    (container,) = _job()["spec"]["template"]["spec"]["containers"]
    script = container["args"][0]
    argv = shlex.split(script.split("exec sglang-exporter sweep", 1)[1])
    args = build_parser().parse_args(argv)
    assert args.trace == "/trace/trace.jsonl" and args.values == ["16", "32", "64", "128"] and args.repeats == 3
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [0]}\n')
    args.trace = str(trace)  # mounted from the ConfigMap in the cluster
    assert _check(args) is None
    plan = plan_of(args)
    assert plan.goodput == ("ttft:2000", "tpot:50")
    assert "--max-running-requests {value}" in plan.server and "{port}" in plan.server
