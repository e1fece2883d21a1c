"""Build the real-server test bed's SGLang stack once, into a cache folder outside the project.

One venv per SGLang release under ``$SGLANG_TESTBED_CACHE`` (default
``~/.cache/sglang-exporter/testbed``): ``sglang-<version>/``, about 3 GB each, plus the tiny model
(``model/``). Idempotent: a venv whose stamp matches the release and the install rules here is kept
as it is (any other is built anew); the stand-ins are copied in on every build.

What is installed (``docs/testbed.md``): the CPU build of torch that pip finds on this machine's
disk; SGLang itself with ``--no-deps``; its own dependencies read from the wheel's
``Requires-Dist``, less the CUDA-only packages of :data:`SKIP` (kernels, flashinfer, nvidia-*,
cuda-*), under a constraint that keeps the CPU torch; triton (SGLang imports it unconditionally);
torchvision without its compiled ops; and the stand-ins of ``testbed/standins/`` (compute ops only).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
STANDINS = HERE / "standins"

#: Releases the test bed supports, with the torch each runs on (the CPU build on disk) and the
#: torchvision whose Python part works beside it (its compiled ops are skipped).
RELEASES = {
    "0.5.23": {"torch": "2.13.0", "torchvision": "0.28.0"},
    "0.5.18": {"torch": "2.13.0", "torchvision": "0.28.0"},
}
#: The newest release, the default of every command.
NEWEST = "0.5.23"
#: SGLang Omni releases, each built as the stack ``omni-<release>`` on the SGLang release it pins
#: (installed as an SGLang release is), with Omni itself ``--no-deps`` and torchaudio ``--no-deps``
#: (the index's build is for CUDA torch: its compiled libraries are removed, so torchaudio imports
#: without them and Omni reads and writes audio through soundfile).
OMNI = {
    "0.1.9": {"sglang": "0.5.22", "torch": "2.13.0", "torchvision": "0.28.0", "torchaudio": "2.11.0"},
}
#: SGLang releases run from an Omni stack's venv, which holds the release its Omni pins, installed as
#: an SGLang release is: 0.5.22 (Omni 0.1.9's) is the first whose per-pass stream fills
#: ``sum_prefill_kv_tokens`` with the cached prefix at schedule time (0.5.18-0.5.21: after the pass).
PINNED_BY_OMNI = {spec["sglang"]: f"omni-{omni}" for omni, spec in OMNI.items() if spec["sglang"] not in RELEASES}
#: What Omni's CPU pipeline (Qwen3-Omni, text and audio out) imports beyond SGLang's dependencies;
#: the rest of Omni's ``Requires-Dist`` serves other models, GPUs or its own tests.
OMNI_EXTRA = ("msgpack", "PyYAML", "accelerate", "qwen-vl-utils==0.0.11", "librosa", "av", "typer",
              "soundfile")
#: Installed beside every release: SGLang imports triton at start-up even on a CPU.
EXTRA = ("triton==3.7.1",)
#: Dependencies left out: CUDA-only builds (kernels, attention libraries, NVIDIA and CUDA runtime
#: packages), torch and its CUDA companions (installed apart), and optional integrations the CPU
#: server never imports. A name is matched after normalising (lower case, ``_`` -> ``-``).
SKIP = re.compile(r"^(nvidia-.*|cuda-.*|flash.*|flashinfer.*|sglang-kernel|sgl-.*|.*kernels|"
                  r"tilelang|tokenspeed-mla|nvshmem4py.*|apache-tvm-ffi|torch|torchaudio|torchvision|"
                  r"torchcodec|torch-memory-saver|deepseek-recipe|tml-renderers|smg-grpc-servicer|"
                  r"modelscope|mistral-common|py-spy|openai-harmony|decord2|av)$")


def cache_dir() -> Path:
    """The cache folder: ``$SGLANG_TESTBED_CACHE``, else ``~/.cache/sglang-exporter/testbed``."""
    env = os.environ.get("SGLANG_TESTBED_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "sglang-exporter" / "testbed"


def stacks() -> list[str]:
    """Every stack the test bed builds: the SGLang releases, then ``omni-<release>``."""
    return list(RELEASES) + [f"omni-{v}" for v in OMNI]


def _spec(version: str) -> dict:
    """The install pins of a stack: an SGLang release, or ``omni-<release>`` (adds ``omni``,
    ``torchaudio`` and the SGLang release it pins as ``sglang``). Raises KeyError when unknown."""
    if version.startswith("omni-"):
        return dict(OMNI[version.removeprefix("omni-")], omni=version.removeprefix("omni-"))
    return dict(RELEASES[version], sglang=version)


def venv_dir(version: str) -> Path:
    """The venv of one stack (it may not exist yet)."""
    return cache_dir() / f"sglang-{version}"


def model_dir() -> Path:
    """The tiny model's folder (config and tokenizer; random weights at load time)."""
    return cache_dir() / "model"


def omni_model_dir() -> Path:
    """The tiny Qwen3-Omni's folder (config, tokenizer, processor and random weights), made by
    ``testbed/omni_model.py``."""
    return cache_dir() / "model-omni"


def python(version: str) -> Path:
    """The Python of a release's venv (a stack, or a release of :data:`PINNED_BY_OMNI`: its Omni stack's)."""
    return venv_dir(PINNED_BY_OMNI.get(version, version)) / "bin" / "python"


def _stamp(version: str) -> str:
    """What the venv's installed packages depend on: the release, its pins and this module's rules."""
    h = hashlib.sha256(version.encode())
    pins = _spec(version) if version.startswith("omni-") else RELEASES[version]  # as before Omni: kept venvs stay
    h.update(json.dumps(pins, sort_keys=True).encode())
    h.update(SKIP.pattern.encode())
    h.update(repr(EXTRA).encode())
    if version.startswith("omni-"):
        h.update(repr(OMNI_EXTRA).encode())
    return h.hexdigest()


def _standin_files() -> list[Path]:
    return sorted(p for p in STANDINS.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def _site(version: str) -> Path:
    return venv_dir(version) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


def _standins_current(version: str) -> bool:
    site = _site(version)
    return all((site / p.relative_to(STANDINS)).is_file()
               and (site / p.relative_to(STANDINS)).read_bytes() == p.read_bytes() for p in _standin_files())


def _venv_ok(version: str) -> bool:
    stamp = venv_dir(version) / ".testbed-stamp"
    return stamp.is_file() and stamp.read_text() == _stamp(version)


def ready(version: str) -> bool:
    """The stack's venv is built by this version of the test bed with the current stand-ins, and
    its model exists (for a release of :data:`PINNED_BY_OMNI`: its Omni stack and the plain model)."""
    if version in PINNED_BY_OMNI:
        return ready(PINNED_BY_OMNI[version]) and (model_dir() / "tokenizer.json").is_file()
    if version not in stacks():
        return False
    model = (omni_model_dir() / "model.safetensors") if version.startswith("omni-") else (model_dir() / "tokenizer.json")
    return _venv_ok(version) and _standins_current(version) and model.is_file()


def _run(cmd: list[str]) -> None:
    """Run a build step; its output is printed less pip's notes on this machine's unused index
    folders (``WARNING: Location ... is ignored``), one per package."""
    print("+", " ".join(map(str, cmd)), flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout.splitlines():
        if not (line.startswith("WARNING: Location ") and line.endswith("is neither a file nor a directory.")):
            print(line, flush=True)
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, cmd)


def _requirements(wheel: Path, version: str) -> list[str]:
    """SGLang's own dependencies for this platform, less :data:`SKIP`."""
    with zipfile.ZipFile(wheel) as z:
        meta = z.read(f"sglang-{version}.dist-info/METADATA").decode()
    reqs = [line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    keep = []
    for req in reqs:
        spec, _, marker = req.partition(";")
        if "extra ==" in marker:
            continue
        if marker.strip() and not _marker_true(marker):
            continue
        name = re.split(r"[\[<>=!~ ]", spec.strip(), maxsplit=1)[0].lower().replace("_", "-")
        if SKIP.match(name):
            continue
        keep.append(spec.strip())
    return keep


def _marker_true(marker: str) -> bool:
    """Evaluate an environment marker for this machine with pip's own ``packaging``."""
    from pip._vendor.packaging.markers import Marker  # pip is always there: it runs the build

    return Marker(marker).evaluate()


def build(version: str = NEWEST) -> Path:
    """Build (or keep) the venv of a stack (an SGLang release or ``omni-<release>``) and its tiny
    model; returns the venv's Python.

    Raises:
        KeyError: ``version`` is not in :func:`stacks`.
        subprocess.CalledProcessError: an install step failed (its output is above).
    """
    release = _spec(version)
    sglang = release["sglang"]
    venv = venv_dir(version)
    if not _venv_ok(version):
        if venv.is_symlink():
            venv.unlink()
        elif venv.exists():
            shutil.rmtree(venv)
        cache_dir().mkdir(parents=True, exist_ok=True)
        _run([sys.executable, "-m", "venv", str(venv)])
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
        _run(pip + [f"torch=={release['torch']}"])
        with tempfile.TemporaryDirectory() as tmp:
            _run([str(venv / "bin" / "python"), "-m", "pip", "download", "-q", "--no-deps", "-d", tmp,
                  f"sglang=={sglang}"])
            wheel = next(Path(tmp).glob("sglang-*.whl"))
            constraints = Path(tmp) / "constraints.txt"
            constraints.write_text(f"torch=={release['torch']}+cpu\n")
            extra = list(EXTRA) + (list(OMNI_EXTRA) if "omni" in release else [])
            reqs = Path(tmp) / "requirements.txt"
            reqs.write_text("\n".join(_requirements(wheel, sglang) + extra) + "\n")
            _run(pip + ["-c", str(constraints), "-r", str(reqs)])
            _run(pip + ["--no-deps", str(wheel), f"torchvision=={release['torchvision']}"])
            if "omni" in release:
                _run(pip + ["--no-deps", f"sglang-omni=={release['omni']}",
                            f"torchaudio=={release['torchaudio']}"])
                for lib in (_site(version) / "torchaudio" / "lib").glob("*.so"):
                    lib.unlink()  # built for CUDA torch; torchaudio imports without them
        (venv / ".testbed-stamp").write_text(_stamp(version))
    site = _site(version)
    for path in _standin_files():  # cheap, so always: a changed stand-in needs no new venv
        target = site / path.relative_to(STANDINS)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    if "omni" in release:
        if not (omni_model_dir() / "model.safetensors").is_file():
            _run([str(venv / "bin" / "python"), str(HERE / "omni_model.py"), str(omni_model_dir())])
    elif not (model_dir() / "tokenizer.json").is_file():
        _run([str(venv / "bin" / "python"), str(HERE / "model.py"), str(model_dir())])
    return venv / "bin" / "python"
