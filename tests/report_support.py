"""Helpers of the report tests: a report document from lines or files, the domain guard off (the
sections must keep their figures' domains by themselves)."""

from __future__ import annotations

from exporter.report import Recorder, analyse, read_logs


def report_lines(lines: list[str], decode_log_interval: int = 40, chunked_prefill_size: int | None = None,
                 **kw) -> dict:
    rec = Recorder(decode_log_interval, chunked_prefill_size)
    rec.feed(list(lines))
    rec.finish_input()
    return analyse(rec, [], enforce_domains=False, **kw)


def report_files(*paths, **kw) -> dict:
    rec = Recorder()
    return analyse(rec, read_logs([str(p) for p in paths], rec, progress=False), enforce_domains=False, **kw)
