"""A glob that matches many files: at most --log.max-files-per-glob of them are followed (the most
recently modified), the rest are counted and warned about once; and an idle exporter does not list
the glob's directory on every timer pass, so its cost does not grow with the files there."""

from __future__ import annotations

import glob
import logging
import os

from conftest import samples, value
from exporter_support import Exporter
from tail_support import Harness, append, decode_block

from exporter.cli import main
from exporter.sources.log import glob as glob_module


def _files(directory, n: int) -> list:
    """``n`` empty log files, file ``i`` modified ``i`` seconds after the first (the last is newest)."""
    paths = []
    for i in range(n):
        p = directory / f"rank-{i:03d}.log"
        p.write_bytes(b"")
        os.utime(p, (1_700_000_000 + i, 1_700_000_000 + i))
        paths.append(p)
    return paths


def _open_fds_under(directory) -> int:
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink(f"/proc/self/fd/{fd}").startswith(str(directory))
        except OSError:
            pass
    return n


def _cap_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "--log.max-files-per-glob" in r.getMessage()]


def test_a_glob_follows_at_most_its_cap_newest_first(tmp_path, caplog):
    logs = _files(tmp_path, 30)
    pattern = str(tmp_path / "*.log")
    caplog.set_level(logging.WARNING, logger="exporter.sources.log")
    with Harness(pattern, max_files_per_glob=5) as h:
        followed = set(h.sources[0].tailers)
        assert followed == {str(p) for p in logs[-5:]}
        assert _open_fds_under(tmp_path) == 5
        assert h.metric("sglang_exporter_log_glob_matched_files", pattern=pattern) == 30
        assert h.metric("sglang_exporter_log_glob_skipped_files", pattern=pattern) == 25
        assert h.metric("sglang_exporter_log_file_opens_total", path=str(logs[0])) is None
        append(logs[-1], decode_block(7))
        append(logs[0], decode_block(3))  # skipped (now the newest of the skipped files): not read
        h.wait_decode(7, "from a followed file only")
        os.unlink(logs[-1])  # a place frees up: the newest skipped file takes it, read from its start
        h.wait(lambda: str(logs[0]) in h.sources[0].tailers, "the newest skipped file to be followed")
        h.wait_decode(10, "from the file that took the free place")
        assert _open_fds_under(tmp_path) == 5
        assert h.metric("sglang_exporter_log_glob_matched_files", pattern=pattern) == 29
        assert h.metric("sglang_exporter_log_glob_skipped_files", pattern=pattern) == 24
    assert len(_cap_warnings(caplog)) == 1, "one warning while the cap stays reached"


def test_the_cap_is_a_setting_of_the_command(tmp_path, capsys):
    assert main(["--log.path", str(tmp_path / "*.log"), "--log.max-files-per-glob", "0"]) == 2
    assert "max-files-per-glob" in capsys.readouterr().err
    _files(tmp_path, 4)
    exp = Exporter("--log.path", str(tmp_path / "*.log"), "--log.max-files-per-glob", "3", "--gpu.enabled", "false")
    try:
        m = exp.wait_for(lambda m: m.get(("sglang_exporter_log_glob_skipped_files",
                                          (("pattern", str(tmp_path / "*.log")),))) == 1, "one skipped file")
        assert sum(1 for name, _ in m if name == "sglang_exporter_log_file_present") == 3
    finally:
        assert exp.terminate() == 0
    assert sum("--log.max-files-per-glob" in line for line in exp.stderr_lines) == 1


def test_one_shot_reads_every_match_one_at_a_time(tmp_path):
    """--one-shot over more files than the cap counts every file's lines, with one file open at a time
    (here under a limit of 32 descriptors); before, it read the 100 newest of 150 and exited 0."""
    import resource
    import subprocess

    from exporter_support import command

    for i in range(150):
        (tmp_path / f"seg{i:03d}.log").write_bytes(decode_block(1, start=i))
    (tmp_path / "dir.log").mkdir()  # a directory among the matches is no file
    pattern = str(tmp_path / "*.log")
    proc = subprocess.run([*command(), "--one-shot", "--log.path", pattern], capture_output=True, text=True,
                          timeout=120, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32)))
    assert proc.returncode == 0, proc.stderr
    m = samples(proc.stdout)
    assert value(m, "sglang_exporter_log_lines_total", kind="decode", result="parsed") == 150
    assert value(m, "sglang_exporter_log_glob_matched_files", pattern=pattern) == 150
    assert value(m, "sglang_exporter_log_glob_skipped_files", pattern=pattern) == 0
    assert "Too many open files" not in proc.stderr and "max-files-per-glob" not in proc.stderr


def test_a_glob_lists_what_glob_glob_lists(tmp_path):
    """The one-scandir listing gives the regular files glob.glob gives, spelled alike (hidden files,
    symlinks to files, directories and dangling links as glob and os.path.isfile see them)."""
    _files(tmp_path, 5)
    (tmp_path / ".hidden.log").write_bytes(b"")
    (tmp_path / "dir.log").mkdir()
    os.symlink(tmp_path / "rank-000.log", tmp_path / "link.log")
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling.log")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x.log").write_bytes(b"")
    for pattern in ("*.log", ".*.log", "rank-00[0-2].log", "*/*.log", "*"):
        for base in (str(tmp_path), os.path.relpath(tmp_path)):
            p = os.path.join(base, pattern)
            assert glob_module.regular_matches(p) == {m for m in glob.glob(p) if os.path.isfile(m)}, p


def test_an_idle_glob_is_not_listed_on_every_pass(tmp_path, monkeypatch):
    """In inotify mode a glob's directory is listed again on a file event (and every
    GLOB_RELIST_INTERVAL seconds), not on every timer pass; in poll mode on every pass."""
    _files(tmp_path, 20)
    listings = []
    real = glob_module.regular_matches
    monkeypatch.setattr(glob_module, "regular_matches", lambda p: (listings.append(p), real(p))[1])
    with Harness(str(tmp_path / "*.log"), poll_interval=0.02) as h:
        start, cycles = len(listings), h.follower.cycles
        h.wait(lambda: h.follower.cycles >= cycles + 20, "20 timer passes")
        assert len(listings) - start <= 1, f"{len(listings) - start} listings in 20 idle passes"
        new = tmp_path / "rank-100.log"
        append(new, decode_block(4))  # a file event: listed again, the new file read from 0
        h.wait_decode(4, "from a file created in the glob's directory")
    listings.clear()
    with Harness(str(tmp_path / "*.log"), poll_interval=0.02, watch_mode="poll") as h:
        cycles = h.follower.cycles
        h.wait(lambda: h.follower.cycles >= cycles + 5, "5 timer passes")
        assert len(listings) >= 5
