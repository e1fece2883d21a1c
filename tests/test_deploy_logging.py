"""The SGLang logging configuration of the sidecar ConfigMap (deploy/kubernetes/base/logging/).

SGLang loads ``SGLANG_LOGGING_CONFIG_PATH`` with ``logging.config.dictConfig`` in every process; here
the same file is loaded the same way, scheduler processes are imitated (their process title, their
logger name, real ``Prefill``/``Decode batch`` and retraction messages from the shared corpus), and
the written file must read back through the exporter's parser with the right rank labels.
"""

from __future__ import annotations

import importlib
import json
import logging
import logging.config
import os
import re
import sys
import types
from pathlib import Path

import pytest

from exporter.events import DecodeBatch, PrefillBatch, Retraction
from exporter.sources.log.parser import parse_line

from conftest import CORPUS, ROOT

LOGGING_DIR = ROOT / "deploy" / "kubernetes" / "base" / "logging"
PREFIX = re.compile(r"^\[[^\]]*\] ")


def _messages(kind: str, n: int) -> list[str]:
    """The first ``n`` real, intact messages of a kind from the corpus, without SGLang's prefix."""
    out = []
    for path in sorted(CORPUS.glob("*.log")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if (PREFIX.match(line) and PREFIX.sub("", line, count=1).startswith(kind)
                    and isinstance(parse_line(line), (DecodeBatch, PrefillBatch, Retraction))):
                out.append(PREFIX.sub("", line, count=1))
                if len(out) == n:
                    return out
    pytest.fail(f"the corpus has fewer than {n} {kind!r} lines")


@pytest.fixture
def helper_module(monkeypatch):
    """The ConfigMap's module, imported as SGLang imports it (its directory on sys.path)."""
    monkeypatch.syspath_prepend(str(LOGGING_DIR))
    sys.modules.pop("sglang_exporter_logging", None)
    module = importlib.import_module("sglang_exporter_logging")
    yield module
    sys.modules.pop("sglang_exporter_logging", None)


@pytest.fixture
def isolated_logging():
    """Restores the root logger and the scheduler loggers after dictConfig replaced them."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, logging.Logger.manager.disable)
    yield
    for handler in root.handlers:
        if handler not in saved[0]:
            handler.close()
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])
    logging.disable(saved[2])


def _config(log_file: Path, **handler_overrides) -> dict:
    """The shipped config with the ConfigMap's mount point replaced by this checkout's folder and
    the log (and GPU UUID file) moved into ``log_file``'s folder."""
    config = json.loads((LOGGING_DIR / "logging.json").read_text(encoding="utf-8"))
    helpers = config["formatters"]["helpers"]
    assert Path(helpers["path_name"]).name == "sglang_exporter_logging.py"
    helpers["path_name"] = str(LOGGING_DIR / "sglang_exporter_logging.py")
    config["handlers"]["shared_file"]["filename"] = str(log_file)
    config["handlers"]["shared_file"]["gpu_uuids_file"] = str(log_file.parent / "gpu-uuids")
    config["handlers"]["shared_file"].update(handler_overrides)
    config["handlers"]["console"]["stream"] = "ext://sys.stdout"  # captured by pytest
    return config


@pytest.mark.parametrize(("title", "prefix"), [
    ("sglang::scheduler", ""),                                   # single GPU: SGLang prints no tags
    ("sglang::scheduler_TP3", " TP3"),
    ("sglang::scheduler_DP1_TP1", " DP1 TP1"),
    ("sglang::scheduler_DP3_TP3_EP3", " DP3 TP3 EP3"),
    ("sglang::scheduler_DP0_PP1_TP2_EP2", " DP0 PP1 TP2 EP2"),
    ("sglang::scheduler_DP2_PP0_ATTN_CP1_MOE_DP1_TP5_EP5", " DP2 PP0 ATTN_CP1 MOE_DP1 TP5 EP5"),
    ("sglang::detokenizer", ""),
    ("python3 -m sglang.launch_server --model-path m", ""),
    ("", ""),
])
def test_prefix_from_the_process_title(helper_module, title, prefix):
    assert helper_module.prefix_from_title(title) == prefix


@pytest.fixture
def process_title(monkeypatch):
    """A stand-in ``setproctitle`` module (SGLang's dependency that the filter reads the scheduler's
    title from); set ``.title`` to play another process."""
    fake = types.ModuleType("setproctitle")
    fake.title = ""
    fake.getproctitle = lambda: fake.title
    monkeypatch.setitem(sys.modules, "setproctitle", fake)
    return fake


def test_config_loads_without_pythonpath_and_leaves_it_alone(isolated_logging, process_title, tmp_path,
                                                               monkeypatch):
    """SGLang's dictConfig finds the helpers by the file's path: the server container's own
    PYTHONPATH is neither needed nor changed, and no module is imported by name (before, the
    config named ``sglang_exporter_logging.RankPrefixFilter`` and needed the ConfigMap on
    PYTHONPATH, which the component set, replacing the user's)."""
    monkeypatch.delitem(sys.modules, "sglang_exporter_logging", raising=False)
    path_before = list(sys.path)
    logging.config.dictConfig(_config(tmp_path / "sglang.log"))
    assert sys.path == path_before
    assert "sglang_exporter_logging" not in sys.modules
    process_title.title = "sglang::scheduler_DP1_TP1"
    logging.getLogger("sglang.srt.managers.scheduler").info("Decode batch, #running-req: 1")
    for handler in logging.getLogger().handlers:
        handler.flush()
    [line] = (tmp_path / "sglang.log").read_text(encoding="utf-8").splitlines()
    assert re.match(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d DP1 TP1\] Decode batch", line), line


def _fake_nvidia_smi(folder: Path, monkeypatch, body: str) -> Path:
    folder.mkdir()
    tool = folder / "nvidia-smi"
    tool.write_text("#!/bin/sh\n" + body)
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    return tool


def test_the_first_process_writes_the_gpu_uuids_once(isolated_logging, process_title, tmp_path,
                                                      monkeypatch):
    """The UUIDs the sidecar selects GPUs by (``gpu.uuids-file``) come from the server container's
    own processes, so the component no longer replaces the container's ``lifecycle.postStart``.
    Written once per file (later processes find it), in nvidia-smi's CSV form the sidecar reads."""
    calls = tmp_path / "calls"
    _fake_nvidia_smi(tmp_path / "bin", monkeypatch,
                     f'echo x >> "{calls}"\n[ "$1 $2" = "--query-gpu=uuid --format=csv,noheader" ] || exit 9\n'
                     'echo GPU-6d3c1a2e-0000-1111-2222-333344445555\necho GPU-0f9e8d7c-aaaa-bbbb-cccc-ddddeeeeffff\n')
    logs = tmp_path / "logs"
    logs.mkdir()
    for _ in range(3):  # three SGLang processes configuring logging in turn
        logging.config.dictConfig(_config(logs / "sglang.log"))
    uuids = (logs / "gpu-uuids").read_text(encoding="utf-8")
    assert uuids == "GPU-6d3c1a2e-0000-1111-2222-333344445555\nGPU-0f9e8d7c-aaaa-bbbb-cccc-ddddeeeeffff\n"
    assert calls.read_text().count("x") == 1
    assert sorted(p.name for p in logs.iterdir()) == [".sglang.log.lock", "gpu-uuids", "sglang.log"]
    from exporter.sources.gpu.devices import UuidSelection
    assert UuidSelection(uuids_file=str(logs / "gpu-uuids")).current() == {
        "GPU-6d3c1a2e-0000-1111-2222-333344445555", "GPU-0f9e8d7c-aaaa-bbbb-cccc-ddddeeeeffff"}


@pytest.mark.parametrize("body", ["exit 3\n", "echo\n", None])
def test_without_a_working_nvidia_smi_logging_still_starts(isolated_logging, process_title, tmp_path,
                                                           monkeypatch, body):
    """No nvidia-smi (a CPU test), one that fails or one that lists no GPU: no UUID file, and
    logging (hence the server) starts all the same."""
    if body is None:
        monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    else:
        _fake_nvidia_smi(tmp_path / "bin", monkeypatch, body)
    logging.config.dictConfig(_config(tmp_path / "sglang.log"))
    logging.getLogger("sglang").info("still logging")
    for handler in logging.getLogger().handlers:
        handler.flush()
    assert not (tmp_path / "gpu-uuids").exists()
    assert (tmp_path / "sglang.log").read_text(encoding="utf-8").endswith("still logging\n")


def test_a_hanging_nvidia_smi_is_given_up(helper_module, tmp_path, monkeypatch):
    _fake_nvidia_smi(tmp_path / "bin", monkeypatch, "sleep 30\n")
    assert helper_module.write_gpu_uuids(str(tmp_path / "gpu-uuids"), timeout=0.5) is False
    assert not list(tmp_path.glob("gpu-uuids*"))


def test_config_writes_lines_the_exporter_reads_with_rank_labels(isolated_logging, process_title,
                                                                 monkeypatch, tmp_path, capsys):
    log_file = tmp_path / "sglang.log"
    logging.config.dictConfig(_config(log_file))
    decode = _messages("Decode batch", 3)
    prefill = _messages("Prefill batch", 2)
    retract = _messages("KV cache pool is full. Retract requests.", 1)
    schedulers = {  # process title -> (dp_rank, replica) the exporter must see
        "sglang::scheduler_DP1_TP1": ("1", "TP1"),
        "sglang::scheduler_DP0_PP1_TP2_EP2": ("0", "PP1 TP2 EP2"),
        "sglang::scheduler_DP3_ATTN_CP1_MOE_DP1_TP3": ("3", "ATTN_CP1 MOE_DP1 TP3"),
        "sglang::scheduler": ("0", ""),
    }
    logger = logging.getLogger("sglang.srt.managers.scheduler")
    expected = []
    for title, labels in schedulers.items():
        # Each scheduler is its own process: a new pid makes the filter read the title again.
        process_title.title = title
        monkeypatch.setattr(os, "getpid", lambda title=title: hash(title))
        for message in decode + prefill:
            logger.info(message)
            expected.append(labels)
        logging.getLogger("sglang.srt.managers.schedule_batch").warning(retract[0])
        expected.append(labels)
    process_title.title = "python3 -m sglang.launch_server"
    monkeypatch.setattr(os, "getpid", lambda: -1)
    logging.getLogger("sglang.srt.entrypoints.http_server").info("INFO:     127.0.0.1 - \"GET /health HTTP/1.1\" 200")
    for handler in logging.getLogger().handlers:
        handler.flush()

    lines = log_file.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(expected) + 1
    seen = []
    for line in lines[:-1]:
        event = parse_line(line)
        assert isinstance(event, (DecodeBatch, PrefillBatch, Retraction)), line
        assert event.origin.log_time is not None, line  # SGLang's date-time prefix survived
        seen.append((event.origin.dp_rank, event.origin.replica))
    assert seen == expected
    assert parse_line(lines[-1]) is None  # the HTTP process's lines are not scheduler lines
    assert re.match(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] INFO: ", lines[-1])
    # The console keeps the same lines (SGLang's console output is not lost).
    console = capsys.readouterr().out.splitlines()
    assert console == lines


def test_the_file_is_bounded_and_every_writer_follows_the_rotation(helper_module, tmp_path):
    """Two handlers on one path stand for two scheduler processes."""
    log_file = tmp_path / "sglang.log"
    one = helper_module.SharedFileHandler(str(log_file), max_bytes=2000)
    two = helper_module.SharedFileHandler(str(log_file), max_bytes=2000)
    fmt = logging.Formatter("%(message)s")
    for handler in (one, two):
        handler.setFormatter(fmt)
    try:
        record = lambda i: logging.LogRecord("sglang", logging.INFO, __file__, 0, f"line {i:04d} " + "x" * 90, None, None)
        for i in range(100):
            (one if i % 2 else two).handle(record(i))
        rotated = tmp_path / "sglang.log.1"
        assert rotated.exists()
        assert log_file.stat().st_size < 2000 + 200
        assert rotated.stat().st_size < 2000 + 200
        # The newest lines of both writers are in the current file, in order.
        current = log_file.read_text().splitlines()
        numbers = [int(line.split()[1]) for line in current]
        assert numbers == sorted(numbers) and numbers[-1] == 99 and 98 in numbers
    finally:
        one.close()
        two.close()


WRITER = r"""
import logging, sys, time
sys.path.insert(0, sys.argv[1])
import sglang_exporter_logging as m

path, who, lines, start = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
handler = m.SharedFileHandler(path, max_bytes=int(sys.argv[6]), backup_count=100000)
handler.setFormatter(logging.Formatter("%(message)s"))
while time.time() < start:  # all writers begin together
    time.sleep(0.001)
for i in range(lines):
    handler.handle(logging.LogRecord("sglang", logging.INFO, "writer", 0, f"w{who:02d} {i:05d} " + "x" * 40,
                                     None, None))
handler.close()
"""


def test_concurrent_writers_rotating_at_once_lose_no_line(tmp_path):
    """16 writer processes, thousands of lines, a rotation every few dozen lines: each line is in
    exactly one segment. (Without the lock, two processes that see the full file at the same
    moment both rename it, and the second rename replaces the first segment.) Segments are all
    kept here (a large backup_count) so that every line can be counted."""
    import subprocess
    import time

    writers, lines, max_bytes = 16, 500, 4096
    log_file = tmp_path / "sglang.log"
    start = time.time() + 1.5
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(LOGGING_DIR), str(log_file), str(w), str(lines),
                               str(start), str(max_bytes)]) for w in range(writers)]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    segments = [log_file] + sorted(tmp_path.glob("sglang.log.*"), key=lambda p: int(p.suffix[1:]))
    assert len(segments) > 50, "too few rotations to test them"
    seen: dict[str, int] = {}
    for segment in segments:
        for line in segment.read_text().splitlines():
            seen[line] = seen.get(line, 0) + 1
    expected = {f"w{w:02d} {i:05d} " + "x" * 40 for w in range(writers) for i in range(lines)}
    assert set(seen) == expected, f"{len(expected - set(seen))} lines lost, {len(set(seen) - expected)} unexpected"
    assert all(n == 1 for n in seen.values()), "a line was written twice"
    # Bounded: no segment grew far past max_bytes (one line of slack).
    assert max(s.stat().st_size for s in segments) < max_bytes + 100
    # Each writer's lines are in order across the segments (oldest segment first).
    order = [line for segment in reversed(segments) for line in segment.read_text().splitlines()]
    for w in range(writers):
        mine = [int(line.split()[1]) for line in order if line.startswith(f"w{w:02d} ")]
        assert mine == list(range(lines))


REAL_SGLANG = r"""
import logging, sys, types
import setproctitle
setproctitle.setproctitle("sglang::scheduler_DP1_TP0")   # as run_scheduler_process does, first
from sglang.srt.utils.common import configure_logger
configure_logger(types.SimpleNamespace(log_level="info"), " DP1 TP0")
logging.getLogger("sglang.srt.managers.scheduler").info(sys.argv[1])
"""


@pytest.mark.parametrize("version", ["0.5.23", "0.5.18"])
def test_real_sglang_loads_the_config_without_pythonpath(version, tmp_path):
    """SGLang's own ``configure_logger`` (the test bed's real releases) loads the shipped config
    with no PYTHONPATH set, and the line it writes carries the scheduler's rank tags, read from
    the process title by the real ``setproctitle``."""
    import subprocess
    from realserver_support import require_stack, stack
    require_stack(version)
    config_file = tmp_path / "logging.json"
    config_file.write_text(json.dumps(_config(tmp_path / "sglang.log")), encoding="utf-8")
    message = _messages("Decode batch", 1)[0]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["SGLANG_LOGGING_CONFIG_PATH"] = str(config_file)
    r = subprocess.run([str(stack.python(version)), "-c", REAL_SGLANG, message], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    [line] = (tmp_path / "sglang.log").read_text(encoding="utf-8").splitlines()
    event = parse_line(line)
    assert isinstance(event, DecodeBatch) and event.origin.dp_rank == "1", line
    assert r.stdout.splitlines()[-1] == line  # the console keeps the same line
