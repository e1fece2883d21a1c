"""``sglang_exporter_*``: the exporter itself, the log source's statistics and the self-metrics.

Log rows read a :class:`~exporter.sources.log.stats.LogSnapshot` (``files.*`` iterates the followed
paths); self rows read the per-scrape values of :class:`~exporter.selfmetrics.GuardedCollectors`.
"""

from __future__ import annotations

from .defs import COUNTER, GAUGE, MetricDef

_TAILER = "the log source's tailer (exporter/sources/log/file.py)"


def _log(name, type_, labels, unit, read, source, help_) -> MetricDef:
    return MetricDef(name, type_, labels, unit, source, help_, "log", read)


def _self(name, type_, labels, unit, read, source, help_) -> MetricDef:
    return MetricDef(name, type_, labels, unit, source, help_, "self", read)


LOG_ROWS = (
    _log("sglang_exporter_log_lines_total", COUNTER, ("kind", "result"), "lines", "lines",
         "the log source's ingest step: each line parsed once (exporter/sources/log/ingest.py), its stage "
         "given by exporter/sources/log/attribution.py",
         "Log lines read, by line kind and result (parsed; ignored: not a scheduler line; malformed: a "
         "scheduler line too damaged to apply; unattributed: an SGLang Omni line of several stages that does "
         "not say which stage printed it, applied to none: see docs/sglang-omni.md)."),
    _log("sglang_exporter_log_rejected_lines_total", COUNTER, ("reason",), "lines", "rejected",
         "the scheduler state's checks (exporter/scheduler/state.py), counted by the ingest step",
         "Scheduler lines parsed but refused (also counted as malformed), by reason: rank (a rank tag the "
         "server cannot have: at or above dp_size of server_args, or another size it prints), schedulers "
         "or replicas (beyond 256 schedulers or 4096 replicas), range (a derived figure out of range, "
         "e.g. decode tokens of #running-req x interval x accept len), error (failed to apply)."),
    _log("sglang_exporter_log_template_lines_total", COUNTER, (), "lines", "template_lines",
         "the log source's ingest step: lines the pattern of exporter/sources/log/templates.py read",
         "Prefill and Decode lines read by the fast path's pattern instead of the per-line parser (the "
         "same event either way). Divided by the parsed prefill and decode lines it is the fast path's "
         "share: below 1 on a steady log, a line format of the server is not in the pattern yet."),
    _log("sglang_exporter_log_bytes_read_total", COUNTER, ("path",), "bytes", "files.*.bytes_read", _TAILER,
         "Bytes read from a followed log file."),
    _log("sglang_exporter_log_file_opens_total", COUNTER, ("path",), "opens", "files.*.opens", _TAILER,
         "Times a followed log file was opened."),
    _log("sglang_exporter_log_oversized_lines_total", COUNTER, ("path",), "lines", "files.*.oversized_lines",
         "the log source's line splitter (exporter/sources/log/lines.py)",
         "Lines dropped because they exceeded --log.max-line-bytes."),
    _log("sglang_exporter_log_file_present", GAUGE, ("path",), "1", "files.*.present", _TAILER,
         "1 when the followed log path exists as a regular file, 0 while waiting for it (or while it "
         "names a directory, FIFO or device, which is skipped with a warning)."),
    _log("sglang_exporter_log_rotations_total", COUNTER, ("path",), "rotations", "files.*.rotations", _TAILER,
         "Times the followed path was found naming another file (rename + create, symlink swap); "
         "the old file is still read for --log.rotate-wait."),
    _log("sglang_exporter_log_missed_rotations_total", COUNTER, ("path",), "files",
         "files.*.missed_rotations", _TAILER,
         "Rotated files of the followed path that were never read (their lines are lost): written "
         "under its name and rotated away between two checks, as when rotations come faster than "
         "--log.poll-interval in poll mode."),
    _log("sglang_exporter_log_truncations_total", COUNTER, ("path",), "truncations", "files.*.truncations",
         _TAILER,
         "Times the followed file was found shorter than the read offset (copytruncate); reading "
         "restarts at 0."),
    _log("sglang_exporter_log_behind_bytes", GAUGE, ("path",), "bytes", "files.*.behind_bytes", _TAILER,
         "Bytes between the read offset and the end of the followed file (and of a rotated file "
         "still being drained) at the latest check."),
    _log("sglang_exporter_log_glob_matched_files", GAUGE, ("pattern",), "files", "patterns",
         "the log source's glob tailer (exporter/sources/log/glob.py)",
         "Files a --log.path glob matched at the latest check."),
    _log("sglang_exporter_log_glob_skipped_files", GAUGE, ("pattern",), "files", "skipped",
         "the log source's glob tailer (exporter/sources/log/glob.py)",
         "Files a --log.path glob matched but does not follow because --log.max-files-per-glob was "
         "reached (the newest files are followed)."),
    _log("sglang_exporter_log_watch_mode_info", GAUGE, ("mode",), "1", "watch_mode",
         "the log source's follower (exporter/sources/log/follower.py)",
         "How file changes are noticed: inotify (file events plus the poll timer) or poll (timer only: "
         "--log.watch-mode=poll, or inotify could not be set up); value 1."),
    _log("sglang_exporter_last_line_timestamp_seconds", GAUGE, (), "seconds", "last_line_wall",
         "the exporter's clock when the ingest step took the latest line",
         "Wall-clock time the exporter read its latest log line."),
)

SELF_ROWS = (
    _self("sglang_exporter_build_info", GAUGE, ("version", "python_version"), "1", "build",
          "the package version and platform.python_version()",
          "Build information of the exporter; value 1."),
    _self("sglang_exporter_collector_success", GAUGE, ("collector",), "1", "success",
          "each guarded collector's collect() in this scrape (exporter/selfmetrics.py)",
          "1 when the named collector succeeded in this scrape."),
    _self("sglang_exporter_collector_duration_seconds", GAUGE, ("collector",), "seconds", "duration",
          "each guarded collector's collect() in this scrape (exporter/selfmetrics.py)",
          "Time the named collector took in this scrape."),
)
