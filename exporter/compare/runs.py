"""One run of a comparison: its log(s) read by the report's own analysis, and its client's result file.

A RUN argument is ``LOG`` (a file or a quoted glob for its rotated segments or nodes) or
``LOG=CLIENT`` (the benchmark client's result file named explicitly). Without ``=CLIENT`` the file
beside the log with the same stem and the suffix ``.jsonl`` is read when it exists
(``mrr-8.log`` -> ``mrr-8.jsonl``; ``.gz`` and then the last suffix are stripped from the first
log file's name). The client file is what ``python -m sglang.benchmark.serving --output-file`` writes:
JSON lines, one object per benchmark run appended; the last object is the run's.

The log's figures are the report's: :func:`exporter.report.analyse` on a
:class:`~exporter.report.Recorder` filled by :func:`~exporter.report.read_logs`, with the report's
defaults, so that each run's document equals ``sglang-exporter report --format json LOG``.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from dataclasses import dataclass, field

from ..limits import DEFAULT_DECODE_LOG_INTERVAL
from ..paths import display_path, file_problem
from ..report import Recorder, analyse, read_logs
from ..report.files import InputFile
from ..sources.log.glob import has_glob, regular_matches

#: The client-file suffixes that make ``X=Y`` a log and its client file rather than one path.
CLIENT_SUFFIXES = (".jsonl", ".json")
#: A corpus or test-bed header line giving the SGLang release (``# version: 0.5.23; ...``).
_VERSION_HEADER = re.compile(r"^#\s*version:\s*v?(\d+\.\d+[\w.+-]*)")


class RunError(ValueError):
    """A RUN argument that names no readable log (the message names the argument)."""


@dataclass
class Run:
    """One run: what was given, the files read and what they gave.

    Attributes:
        spec: the RUN argument as given.
        logs: the log files read, in order.
        doc: the report document of the logs (:func:`exporter.report.analyse`).
        server_args: the last ``server_args`` line's settings (name -> value as printed), or ``{}``.
        version: the SGLang release, from the log's ``# version:`` header line, else the client file's
            ``server_info.version`` (the client asks the server's ``/server_info``) or ``sglang_version``;
            ``None`` when none says.
        client: the client's result object, or ``None``; ``client_path`` its file;
            ``client_reason`` why there is none.
        inputs: what the report's reader says of each log file (lines read, scheduler lines).
    """

    spec: str
    logs: list[str]
    doc: dict
    server_args: dict[str, str]
    version: str | None
    client: dict | None = None
    client_path: str | None = None
    client_reason: str | None = None
    inputs: list[InputFile] = field(default_factory=list)


def split_spec(spec: str) -> tuple[str, str | None]:
    """``"LOG=CLIENT.jsonl"`` -> ``("LOG", "CLIENT.jsonl")``; a spec without such a tail -> ``(spec, None)``."""
    log, eq, client = spec.rpartition("=")
    if eq and log and client.lower().endswith(CLIENT_SUFFIXES):
        return log, client
    return spec, None


def log_files(pattern: str) -> list[str]:
    """The regular files a LOG names (a glob's matches in name order).

    Raises:
        RunError: nothing matches, or a file is missing, a directory or unreadable.
    """
    files = sorted(regular_matches(pattern)) if has_glob(pattern) and not os.path.lexists(pattern) else [pattern]
    if not files:
        raise RunError(f"{display_path(pattern)!r} matches no file")
    for f in files:
        problem = file_problem(f)
        if problem:
            raise RunError(f"{display_path(f)!r} {problem}")
    return files


def beside(log: str) -> str:
    """The client file beside a log: same folder and stem, suffix ``.jsonl`` (``.gz`` stripped first)."""
    base = log[:-3] if log.endswith(".gz") else log
    stem, _ = os.path.splitext(base)
    return stem + ".jsonl"


def read_client(path: str) -> tuple[dict | None, str | None]:
    """``(last JSON object of the file, None)``, or ``(None, reason)`` when the file gives none."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = [x for x in f.read().splitlines() if x.strip()]
    except OSError as exc:
        return None, f"client file {display_path(path)!r}: {exc.strerror or exc}"
    except UnicodeDecodeError:
        return None, f"client file {display_path(path)!r} is not UTF-8 text"
    for line in reversed(lines):
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            return obj, None
    return None, f"client file {display_path(path)!r} holds no JSON object"


def _log_version(path: str) -> str | None:
    """The ``# version:`` header of a log (first 5 lines; corpus and test-bed files carry one)."""
    try:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8", errors="replace") as f:
            for _ in range(5):
                m = _VERSION_HEADER.match(f.readline())
                if m:
                    return m.group(1).rstrip(";")
    except OSError:
        return None
    return None


def load(spec: str, progress: bool | None = False) -> Run:
    """Read one RUN argument (see the module docstring).

    Raises:
        RunError: the LOG part names no readable file, or an explicit client file is missing.
        OSError: a log cannot be read mid-way.
    """
    pattern, explicit = split_spec(spec)
    logs = log_files(pattern)
    if explicit is not None:
        problem = file_problem(explicit)
        if problem:
            raise RunError(f"client file {display_path(explicit)!r} {problem}")
    rec = Recorder(DEFAULT_DECODE_LOG_INTERVAL, None)
    inputs = read_logs(logs, rec, progress)
    doc = analyse(rec, inputs, 10.0, None, None, {})
    run = Run(spec=spec, logs=logs, doc=doc, server_args=dict(rec.server_args), version=_log_version(logs[0]),
              inputs=inputs)
    path = explicit or beside(logs[0])
    if explicit is None and not os.path.exists(path):
        run.client_reason = f"no client file (looked for {display_path(path)!r}; name one as LOG=CLIENT.jsonl)"
    else:
        run.client_path = path
        run.client, run.client_reason = read_client(path)
    if run.client is not None and run.version is None:
        info = run.client.get("server_info")
        v = (info.get("version") if isinstance(info, dict) else None) or run.client.get("sglang_version")
        run.version = str(v) if v is not None else None
    return run
