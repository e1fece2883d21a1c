"""Globs: every file matching a pattern followed by its own :class:`~.file.Tailer`, and the set of
tailers for a ``--log.path`` list.

Each configured path or glob is followed on its own; a file is followed by one reader at a time
even when several patterns match it, and a rotated file that a glob matches under its new name
(``sglang.log*`` matching ``sglang.log.1``) is continued from where it was left, not read again.
A glob follows at most ``max_files`` files (``--log.max-files-per-glob``): each costs a file
descriptor, a check per poll and seven series.
"""

from __future__ import annotations

import fnmatch
import glob
import logging
import os
import time
from collections.abc import Callable, Sequence

from ...limits import DEFAULT_MAX_FILES_PER_GLOB, DEFAULT_MAX_LINE_BYTES, DEFAULT_ROTATE_WAIT
from ...paths import display_path
from .file import LineSink, Tailer
from .registry import Registry
from .stats import LogStats

log = logging.getLogger(__name__)


def has_glob(path: str) -> bool:
    """True when ``path`` contains glob magic (``*``, ``?``, ``[``)."""
    return glob.has_magic(path)


class GlobTailer:
    """Follows every file matching a glob pattern, each with its own :class:`Tailer`.

    Matches are looked up when asked (:meth:`poll` with ``relist``: the follower asks on a file
    event, in ``poll`` mode and every few seconds), always while the pattern has magic in a
    directory part or its directory is missing. Files matching at start-up start at their end (or at
    0 with ``from_beginning``); files that appear later are read from 0. A tailer whose file has
    gone and has been drained is dropped with its self-metrics, so a glob over rotating request-log
    files does not grow the label set without bound.

    At most ``max_files`` files are followed. When more match, the files already followed are kept
    and free places go to the most recently modified of the others (the active files of a rotating
    set); the rest are skipped, counted in ``LogStats.skipped`` and warned about once each time the
    cap is reached.

    Args:
        pattern: A glob (``glob.glob`` syntax, ``**`` not recursive).
        claimed: Absolute paths followed by plain-path tailers; they are left to those.
        max_files: Most files followed (``--log.max-files-per-glob``).
        covered: True for a path that some glob of the exporter follows (see :class:`Tailer`).
        Other arguments as for :class:`Tailer`.
    """

    def __init__(self, pattern: str, sink: LineSink, stats: LogStats | None = None, from_beginning: bool = False,
                 max_line_bytes: int = DEFAULT_MAX_LINE_BYTES, rotate_wait: float = DEFAULT_ROTATE_WAIT,
                 registry: Registry | None = None, clock: Callable[[], float] = time.monotonic,
                 claimed: set[str] | None = None, max_files: int = DEFAULT_MAX_FILES_PER_GLOB,
                 covered: Callable[[str], bool] | None = None):
        self.path = pattern
        self.sink = sink
        self.log_stats = stats if stats is not None else LogStats()
        self.kw = dict(from_beginning=from_beginning, max_line_bytes=max_line_bytes, rotate_wait=rotate_wait,
                       registry=registry if registry is not None else Registry(), clock=clock, covered=covered,
                       follow_deleted=False)  # a deleted match gets no successor: drained, then dropped
        self.claimed = claimed if claimed is not None else set()
        self.max_files = max_files
        self.tailers: dict[str, Tailer] = {}
        self._started = False
        self._matches: set[str] = set()
        self._skipped = 0
        self._base = _base_dir(pattern)
        self._dir_magic = has_glob(os.path.dirname(pattern))
        self.log_stats.set_matches(pattern, 0)

    def poll(self, relist: bool = True) -> int:
        """Look up matches (when ``relist``, or when they cannot be trusted), then poll each
        followed file; returns lines fed."""
        if relist or not self._started or self._dir_magic or not os.path.isdir(self._base):
            self._relist()
        fed = 0
        freed = False
        for m, t in list(self.tailers.items()):
            fed += t.poll()
            if m not in self._matches and t.idle:
                del self.tailers[m]
                self.log_stats.drop_file(m)
                freed = True
        if freed and self._skipped:  # a place is free for a skipped file
            self._relist()
            fed += sum(t.poll() for t in list(self.tailers.values()) if not t.stats.opens)
        return fed

    def _relist(self) -> None:
        matches = regular_matches(self.path)
        if not self._started and not matches:
            log.warning("%s matches no file (yet); waiting for files", display_path(self.path))
        new = list(matches.difference(self.tailers))
        if self.claimed:
            new = [m for m in new if os.path.abspath(m) not in self.claimed]
        room = max(0, self.max_files - len(self.tailers))
        skipped = max(0, len(new) - room)
        if skipped:  # the newest first; without a free place nothing is looked at
            new = sorted(new, key=_mtime_ns, reverse=True)[:room] if room else []
            if not self._skipped:
                log.warning("%s matches more than %d files (--log.max-files-per-glob): following the %d most "
                            "recently modified, skipping %d", display_path(self.path), self.max_files,
                            len(self.tailers) + len(new), skipped)
        for m in sorted(new):
            self.tailers[m] = Tailer(m, self.sink, self.log_stats, started=self._started, **self.kw)
        self._started = True
        self._matches = matches
        self._skipped = skipped
        self.log_stats.set_matches(self.path, len(matches), skipped)

    def read_each(self) -> int:
        """Read every matching file to its end, in name order, one at a time (one-shot mode).

        A recorded log's every file is counted: the cap (``max_files``) is for the files a live
        exporter holds open and checks on every pass, and here each file is opened, read, flushed
        and closed before the next, so one descriptor is open whatever the number of files.

        Returns:
            Lines handed to the sink.
        """
        matches = sorted(m for m in regular_matches(self.path) if os.path.abspath(m) not in self.claimed)
        fed = 0
        for m in matches:
            t = Tailer(m, self.sink, self.log_stats, started=True, **self.kw)
            try:
                fed += t.read_once()
            finally:
                t.close()
        self._started = True
        self.log_stats.set_matches(self.path, len(matches))
        return fed

    def read_appends(self) -> int:
        """Read appends to every matched file (see :meth:`Tailer.read_appends`)."""
        return sum(t.read_appends() for t in self.tailers.values())

    def flush(self) -> int:
        """Flush every matched file's held partial line."""
        return sum(t.flush() for t in self.tailers.values())

    def close(self) -> None:
        """Close every matched file."""
        for t in self.tailers.values():
            t.close()

    def watch_names(self) -> set[str] | None:
        """Name patterns whose file events concern this glob: the pattern's last part (a new match)
        and each followed file's names (:meth:`Tailer.watch_names`); ``None`` (every event) when
        the pattern has magic in a directory part."""
        if self._dir_magic:
            return None
        names = {os.path.basename(self.path)}
        for t in self.tailers.values():
            names |= t.watch_names()
        return names

    def watch_dirs(self) -> set[str]:
        """The deepest directory of the pattern without glob magic, and each match's directories."""
        dirs = {self._base}
        for t in self.tailers.values():
            dirs |= t.watch_dirs()
        return dirs


def regular_matches(pattern: str) -> set[str]:
    """The regular files (symlinks followed) that ``glob.glob(pattern)`` gives, as it spells them.

    A pattern whose magic is in its last part only (the usual ``/logs/*.log``) is matched over one
    ``scandir`` of its directory, whose entries know their type without a ``stat`` each; others go
    through :func:`glob.glob` and a ``stat`` per match.
    """
    directory, name = os.path.split(pattern)
    if has_glob(directory):
        return _deep_matches(pattern)
    return _matches_in(directory, name, os.DirEntry.is_file)


#: Directory entries one relist of a pattern with magic in a directory part looks at, at most.
MAX_GLOB_ENTRIES = 100_000
_warned_entries: set[str] = set()


def _matches_in(directory: str, name: str, kind: Callable[[os.DirEntry], bool],
                budget: list[int] | None = None) -> set[str]:
    """Entries of ``directory`` whose name matches ``name`` (glob rules: ``*`` does not match a
    leading dot) and that are of ``kind`` (symlinks followed), spelled ``directory/name``. The
    entries looked at are taken off ``budget[0]``."""
    hidden_too = name.startswith(".")
    try:
        with os.scandir(directory or ".") as it:
            entries = [e for e in it if hidden_too or not e.name.startswith(".")]
    except OSError:
        return set()
    if budget is not None:
        budget[0] -= len(entries)
    names = set(fnmatch.filter([e.name for e in entries], name))
    found = set()
    for e in entries:
        if e.name in names:
            try:
                if kind(e):
                    found.add(os.path.join(directory, e.name))
            except OSError:
                pass
    return found


def _deep_matches(pattern: str) -> set[str]:
    """:func:`regular_matches` for magic in a directory part, without ``glob.glob``'s blow-up.

    The pattern is expanded one part at a time; a directory reached again under another spelling
    (a symlink to ``.`` or to a parent: a loop) is kept once per part, by device and inode, and so
    is a matching file, so the work grows with the real directories, not with the spellings (10
    links to ``.`` under 6 ``*`` parts gave ``glob.glob`` 1,000,000 paths at every relist). At most
    :data:`MAX_GLOB_ENTRIES` entries are looked at; past it the rest is left out, with a warning.
    """
    root = os.sep if pattern.startswith(os.sep) else ""
    parts = [p for p in pattern.split(os.sep) if p]
    first = next(i for i, p in enumerate(parts) if has_glob(p))
    dirs = [root + os.path.join(*parts[:first])] if first else [root]
    budget = [MAX_GLOB_ENTRIES]
    for i, part in enumerate(parts[first:], first):
        last = i == len(parts) - 1
        kind = os.DirEntry.is_file if last else os.DirEntry.is_dir
        seen: set[tuple[int, int]] = set()
        found: list[str] = []
        for d in dirs:
            if budget[0] <= 0:
                if pattern not in _warned_entries:
                    _warned_entries.add(pattern)
                    log.warning("%s: more than %d directory entries to look at; matching the first only",
                                display_path(pattern), MAX_GLOB_ENTRIES)
                break
            if has_glob(part):
                candidates = sorted(_matches_in(d, part, kind, budget))
            else:
                c = os.path.join(d, part)
                candidates = [c] if (os.path.isfile(c) if last else os.path.isdir(c)) else []
            for c in candidates:
                try:
                    st = os.stat(c)
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    found.append(c)
        dirs = found
    return set(dirs)


def _base_dir(pattern: str) -> str:
    """The deepest directory of ``pattern`` without glob magic, absolute."""
    base = os.path.abspath(pattern)
    while has_glob(base):
        base = os.path.dirname(base)
    return base


def _mtime_ns(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0


def covered_by(patterns: Sequence[str]) -> Callable[[str], bool]:
    """A test of whether a file path matches one of ``patterns`` (globs, as absolute patterns)."""
    absolute = [os.path.abspath(p) for p in patterns]
    return lambda path: any(fnmatch.fnmatchcase(os.path.abspath(path), p) for p in absolute)


def make_sources(paths: Sequence[str], sink: LineSink, stats: LogStats | None = None, from_beginning: bool = False,
                 max_line_bytes: int = DEFAULT_MAX_LINE_BYTES, rotate_wait: float = DEFAULT_ROTATE_WAIT,
                 clock: Callable[[], float] = time.monotonic,
                 max_files_per_glob: int = DEFAULT_MAX_FILES_PER_GLOB) -> list[Tailer | GlobTailer]:
    """Build one :class:`Tailer` per plain path and one :class:`GlobTailer` per glob.

    Duplicates are followed once; all share one :class:`Registry`, so no file is read twice.
    """
    registry = Registry()
    plain: list[str] = []
    globs: list[str] = []
    for p in dict.fromkeys(paths):
        (globs if has_glob(p) else plain).append(p)
    claimed = {os.path.abspath(p) for p in plain}
    kw = dict(from_beginning=from_beginning, max_line_bytes=max_line_bytes, rotate_wait=rotate_wait,
              registry=registry, clock=clock, covered=covered_by(globs))
    stats = stats if stats is not None else LogStats()
    sources: list[Tailer | GlobTailer] = [Tailer(p, sink, stats, **kw) for p in plain]
    sources += [GlobTailer(g, sink, stats, claimed=claimed, max_files=max_files_per_glob, **kw) for g in globs]
    return sources
