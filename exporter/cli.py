"""The ``sglang-exporter`` command: wires settings, sources, the scheduler store, collectors and HTTP.

Exit codes (:class:`~exporter.status.ExitStatus`): 0 on success (one-shot done, or the served command
stopped by SIGTERM/SIGINT), 1 on a runtime failure (the listen address cannot be bound), 2 on a bad setting
(the message names it), 3 when a one-shot read found no SGLang scheduler line in any file, 130 when a
one-shot read was stopped by Ctrl-C.
"""

from __future__ import annotations

import gc
import glob
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from .commands import dispatch, misspelt_command
from .paths import display_path, file_problem
from .scheduler.collector import PipelineCollector, SchedulerCollector
from .scheduler.state import SchedulerStates
from .scheduler.store import SchedulerStore
from .selfmetrics import GuardedCollectors
from .settings import Settings, SettingsError, load_settings, parse_listen_address, parse_stage_intervals, unknown_environment
from .sources.log.glob import has_glob
from .sources.log.source import LogSource
from .status import PROG, ExitStatus, error, interrupted, os_error, usage_error, write_stdout

if TYPE_CHECKING:
    from .sources.gpu import GpuCollector

# Each mode imports what it uses only (the HTTP server, NVML, the demo and the report are loaded by
# the mode that needs them), so that one-shot starts fast and the sidecar holds less memory.

log = logging.getLogger("sglang_exporter")


def build_registry(store: SchedulerStore, log_source: LogSource, idle_after: float | None,
                   gpu: GpuCollector | None = None, fpm: Collector | None = None,
                   omni: Collector | None = None, fine_buckets: bool = False) -> CollectorRegistry:
    """A private registry: the scheduler collector, SGLang Omni's pipeline collector (from the log),
    then each source's (``gpu``, ``fpm``, ``omni`` if given), all guarded. Before they collect, the
    log reader reads what was appended since its last pass, so that a scrape shows every line
    written before it (:class:`ScrapeRegistry`).

    The ``collector`` label of ``sglang_exporter_collector_success`` names them: ``scheduler``,
    ``pipeline``, ``log``, ``gpu``, ``fpm``, ``omni``. Every collector describes its families from the
    metric table, so the registry knows each name: ``/metrics?name[]=...`` answers with the families asked for, and a
    family that two collectors claim fails here, at start-up.
    """
    collectors: list[tuple[str, Collector]] = [
        ("scheduler", SchedulerCollector(store, idle_after, fine_buckets=fine_buckets)),
        ("pipeline", PipelineCollector(store)),
        ("log", log_source.collector()),
    ]
    if gpu is not None:
        collectors.append(("gpu", gpu))
    if fpm is not None:
        collectors.append(("fpm", fpm))
    if omni is not None:
        collectors.append(("omni", omni))
    registry = ScrapeRegistry(log_source.catch_up)
    registry.register(GuardedCollectors(collectors))
    return registry


class ScrapeRegistry(CollectorRegistry):
    """The client library's registry (``auto_describe`` off), which first has the log reader catch
    up on what was appended (:meth:`LogSource.catch_up`: bounded, and a no-op when no reader thread
    runs, as in one-shot mode), for a whole scrape and for a ``name[]`` one alike.

    Args:
        catch_up: Asks the log reader to read the appends and waits for it.
    """

    def __init__(self, catch_up: Callable[[], object]):
        super().__init__(auto_describe=False)
        self._catch_up = catch_up

    def collect(self) -> Iterator[Metric]:
        self._catch_up()
        return super().collect()

    def restricted_registry(self, names: Iterable[str]):
        self._catch_up()
        return super().restricted_registry(names)


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit code (see the module docstring)."""
    if argv is None:
        argv = sys.argv[1:]
    status = dispatch(argv)  # `sglang-exporter report LOG...` and the other subcommands (commands.py)
    if status is not None:
        return status
    misspelt = misspelt_command(argv)  # `sglang-exporter reprot x.log`
    if misspelt:
        return usage_error(misspelt)
    env_warnings = unknown_environment(os.environ)  # a misspelt variable may be why a setting is missing
    try:
        settings = load_settings(argv)
    except SettingsError as exc:
        for warning in env_warnings:
            print(f"{PROG}: warning: {warning}", file=sys.stderr)
        return usage_error(str(exc))
    level = settings.log.level.upper()
    if settings.one_shot and level == "INFO":
        level = "WARNING"  # one-shot output is the exposition on stdout; keep stderr for problems
    logging.basicConfig(level=level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for warning in env_warnings:
        log.warning("%s", warning)
    if not settings.demo and not settings.log.path:
        return usage_error("setting log.path (--log.path, SGLANG_EXPORTER_LOG__PATH) is required "
                            "(or use --demo)")
    if settings.demo and settings.log.path:
        return usage_error("setting demo (--demo) replays the bundled sample log; it cannot be combined "
                            "with log.path (--log.path)")
    interval_source = "setting" if settings.given("sglang", "decode_log_interval") else "default"
    stage_intervals = (parse_stage_intervals(settings.sglang.stage_decode_log_intervals)
                       if settings.sglang.stage_decode_log_intervals else {})
    store = SchedulerStore(SchedulerStates(settings.sglang.decode_log_interval,
                                           chunked_prefill_size=settings.sglang.chunked_prefill_size,
                                           decode_log_interval_source=interval_source,
                                           stage_decode_log_intervals=stage_intervals),
                           # the demo's bundled log is known to rest on the default: said once, at INFO
                           assumed_interval_level=logging.INFO if settings.demo else logging.WARNING)
    if settings.one_shot:
        try:
            return _one_shot(settings, store)
        except OSError as exc:  # stdout on a full disk or closed, a file gone unreadable mid-read
            return os_error(exc)
        except KeyboardInterrupt:  # Ctrl-C: one line, not a traceback (the workers have ended with it)
            return interrupted()
    return _serve(settings, store)


def _log_path_setting(settings: Settings) -> str:
    """``log.path`` as an error names it: every place it can come from, the config file by name."""
    where = "--log.path, SGLANG_EXPORTER_LOG__PATH"
    if settings.config.file:
        where += f", or path in [log] of {display_path(settings.config.file)}"
    return f"setting log.path ({where})"


def _one_shot(settings: Settings, store: SchedulerStore) -> int:
    if settings.log.paths:
        paths = settings.log.paths
    else:
        from .demo import sample_log_path
        paths = [str(sample_log_path())]
    for path in paths:
        if has_glob(path):
            if not any(os.path.isfile(m) for m in glob.glob(path)):
                return usage_error(f"{_log_path_setting(settings)}: {display_path(path)!r} matches no file")
        elif (problem := file_problem(path)) is not None:
            return usage_error(f"{_log_path_setting(settings)}: {display_path(path)!r} {problem}")
    log_source = LogSource(paths, store, from_beginning=True, max_line_bytes=settings.log.max_line_bytes,
                           max_files_per_glob=settings.log.max_files_per_glob, bulk=True)
    log_source.read_all()
    registry = build_registry(store, log_source, None, fine_buckets=settings.sglang.fine_buckets)
    write_stdout(generate_latest(registry).decode())
    return _warn_no_scheduler_lines(log_source)


def _warn_no_scheduler_lines(log_source: LogSource) -> ExitStatus:
    """After a one-shot read: warn for each file without an SGLang scheduler line, naming it and the
    lines read, in the words of ``sglang-exporter report``; NO_SCHEDULER_LINES when no file had one."""
    empty = log_source.files_without_scheduler_lines()
    for path, lines, size in empty:
        what = "the file is empty" if size == 0 else f"{lines:,} line{'s' if lines != 1 else ''} read"
        print(f"{PROG}: warning: no SGLang scheduler line in {path!r} ({what})", file=sys.stderr)
    if empty and len(empty) == len(log_source.stats.files):
        return ExitStatus.NO_SCHEDULER_LINES
    return ExitStatus.OK


def listen_address(settings: Settings) -> str:
    """The HOST:PORT to serve on: ``--web.listen-address``, except that ``--demo`` without that setting
    listens on the loopback interface only (the README's demo is for this machine)."""
    if settings.demo and "listen_address" not in settings.web.model_fields_set:
        return f"127.0.0.1:{parse_listen_address(settings.web.listen_address)[1]}"
    return settings.web.listen_address


def _serve(settings: Settings, store: SchedulerStore) -> int:
    from .web import WebServer, make_app

    stop = threading.Event()
    replayer = None
    tmpdir = None
    if settings.demo and not settings.log.path:
        import tempfile

        from .demo import Replayer

        tmpdir = tempfile.TemporaryDirectory(prefix="sglang-exporter-demo-")
        demo_path = Path(tmpdir.name) / "sglang.log"
        demo_path.touch()
        replayer = Replayer(demo_path)
        paths, from_beginning = [str(demo_path)], True
    else:
        paths, from_beginning = settings.log.paths, settings.log.from_beginning
    log_source = LogSource(paths, store, from_beginning=from_beginning, max_line_bytes=settings.log.max_line_bytes,
                           rotate_wait=settings.log.rotate_wait, poll_interval=settings.log.poll_interval,
                           watch_mode=settings.log.watch_mode, max_files_per_glob=settings.log.max_files_per_glob)
    path = ", ".join(paths)
    # SGLang's per-forward-pass stream is live, so it is followed only here (never in one-shot mode).
    fpm = None
    if settings.fpm.endpoint_list:
        import zmq

        from .sources.fpm import make_source  # zmq and msgspec are imported only when the stream is asked for

        try:
            fpm = make_source(settings.fpm)
        except zmq.ZMQError as exc:
            return usage_error(f"setting fpm.endpoints (--fpm.endpoints, SGLANG_EXPORTER_FPM__ENDPOINTS): "
                                f"ZeroMQ refuses it: {exc}")
    # NVML describes this machine now, so it runs only here, never in one-shot mode (a recorded log).
    # The demo promises to run without a GPU: there, a machine without NVML is said at INFO, not WARNING.
    gpu_poller = gpu = None
    if settings.gpu.enabled:
        from .sources.gpu import GpuCollector, make_poller

        gpu_poller = make_poller(settings.gpu, gpu_optional=settings.demo)
        gpu = GpuCollector(gpu_poller)
    # SGLang Omni's endpoints describe the server now, so they are polled only here, like NVML.
    omni_poller = None
    if settings.omni.url:
        from .sources.omni import OmniCollector, make_poller as make_omni_poller
        from .sources.omni.silence import SilentStages

        omni_poller = make_omni_poller(settings.omni, on_stages=SilentStages(store, log_source.stats))
    registry = build_registry(store, log_source, settings.sglang.idle_after, gpu,
                              fpm.collector if fpm is not None else None,
                              OmniCollector(omni_poller) if omni_poller is not None else None,
                              fine_buckets=settings.sglang.fine_buckets)
    listen = listen_address(settings)
    host, port = parse_listen_address(listen)

    def health() -> tuple[bool, str]:
        ok, reason = log_source.health()  # the reader waits or makes progress, not merely "its thread lives"
        if ok and gpu_poller is not None:
            return gpu_poller.health()  # 503 after repeated NVML "Unknown" errors (lost device access)
        return ok, reason

    app, tls = make_app(registry, settings.web.telemetry_path, health), None
    if settings.web.config_file:  # checked with the settings: TLS, basic auth, headers
        from .webconfig import load_web_config

        web_config = load_web_config(settings.web.config_file)
        app, tls = web_config.wrap(app), web_config.tls
    server = WebServer(host, port, app, tls=tls)
    # The follower's first pass fixes the start position (the end of existing files) before anything
    # is served, so "start at the end" means the end at launch.
    log_source.start()
    log_source.wait_first_pass(timeout=10.0)
    # Start-up is done (imports, settings, the registry, the first pass over the log): what is left
    # now lives as long as the process. Collect once, then move it to the garbage collector's
    # permanent generation, which its full collections skip; otherwise a full collection walks the
    # whole start-up heap about every tenth /metrics render of a busy server and makes the render's
    # p99 (docs/performance.md, Render).
    gc.collect()
    gc.freeze()
    try:
        server.start()
    except OSError as exc:
        log_source.stop()
        if fpm is not None:
            fpm.stop()
        error(f"cannot listen on {listen} (--web.listen-address): {exc.strerror or exc}")
        return ExitStatus.RUNTIME
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if gpu_poller is not None:
        gpu_poller.start()
    if fpm is not None:
        fpm.start()
    if omni_poller is not None:
        omni_poller.start()
    if replayer is not None:
        replayer.start()
    shown = host if host else "0.0.0.0"
    log.info("serving metrics on %s://%s:%d%s, following %s", "https" if tls else "http",
             shown if ":" not in shown else f"[{shown}]", server.port, settings.web.telemetry_path, path)
    if fpm is not None:
        log.info("subscribed to SGLang's forward-pass metrics at %s", ", ".join(settings.fpm.endpoint_list))
    if omni_poller is not None:
        log.info("polling SGLang Omni at %s every %g s", omni_poller.base, settings.omni.poll_interval)
    if replayer is not None:
        near = "localhost" if shown in ("0.0.0.0", "127.0.0.1") else shown
        log.info("demo: replaying the bundled sample log (its retraction storm starts about 20 s in); "
                 "try: curl -s http://%s:%d%s | grep retractions_total", near, server.port, settings.web.telemetry_path)
    try:
        while not stop.wait(3600):
            pass
    finally:
        log.info("shutting down")
        if replayer is not None:
            replayer.stop()
        log_source.stop()
        if gpu_poller is not None:
            gpu_poller.stop()
        if fpm is not None:
            fpm.stop()
        if omni_poller is not None:
            omni_poller.stop()
        server.stop()
        if tmpdir is not None:
            tmpdir.cleanup()
    return ExitStatus.OK


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())
