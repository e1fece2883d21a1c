"""The Kubernetes example turns SGLang's per-forward-pass stream on and the sidecar reaches it.

Rendered with real kustomize (the helpers of tests/test_deploy_kubernetes.py): the server binds
``<--forward-pass-metrics-ipc-name>.0`` in a volume the sidecar mounts, the sidecar's endpoint is
exactly that socket, and the socket is connectable by the sidecar's user.
"""

from __future__ import annotations

import shlex

import pytest
from kubernetes_support import K8S, KUSTOMIZATIONS, pod_of, render, sidecar_of

from exporter.settings import load_settings, parse_zmq_endpoint


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict]]:
    return {name: render(K8S / name) for name in KUSTOMIZATIONS}


def _flag(args: list[str], name: str) -> str | None:
    for a in args:
        if a == name:
            return ""
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


@pytest.mark.parametrize("name", sorted(KUSTOMIZATIONS))
def test_server_publishes_where_the_sidecar_subscribes(rendered, name):
    pod = pod_of(rendered[name])
    server = next(c for c in pod["containers"] if c["name"] == "sglang")
    sidecar = sidecar_of(pod)
    args = server.get("args", [])
    assert _flag(args, "--enable-forward-pass-metrics") == ""
    base = _flag(args, "--forward-pass-metrics-ipc-name")
    transport, path = parse_zmq_endpoint(base)
    assert transport == "ipc"
    env = {e["name"]: e.get("value") for e in sidecar["env"]}
    endpoints = load_settings(["--log.path", "x", "--fpm.endpoints", env["SGLANG_EXPORTER_FPM__ENDPOINTS"]]).fpm
    # SGLang's scheduler binds f"{base}.{dp_rank}"; this example runs one DP rank.
    assert endpoints.endpoint_list == [f"{base}.0"]
    # The same emptyDir at the same path in both containers, read-only in the sidecar.
    server_mounts = {m["name"]: m for m in server["volumeMounts"]}
    sidecar_mounts = {m["name"]: m for m in sidecar["volumeMounts"]}
    volume = next(n for n, m in server_mounts.items() if path.startswith(m["mountPath"].rstrip("/") + "/"))
    assert sidecar_mounts[volume]["mountPath"] == server_mounts[volume]["mountPath"]
    assert sidecar_mounts[volume]["readOnly"] is True and not server_mounts[volume].get("readOnly")
    assert "emptyDir" in {v["name"]: v for v in pod["volumes"]}[volume]
    # The sidecar runs as another user: the socket must be writable by others (umask without 0o002).
    script = server["command"]
    assert script[:2] == ["sh", "-c"] and "exec python3 -m sglang.launch_server \"$@\"" in script[2]
    umask = next(int(w[i + 1], 8) for w in [shlex.split(script[2])] for i, t in enumerate(w) if t == "umask")
    assert not umask & 0o002
    assert sidecar["securityContext"]["runAsUser"] != 0
