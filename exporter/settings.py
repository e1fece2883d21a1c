"""Settings: command-line flags, ``SGLANG_EXPORTER_*`` environment variables and a TOML file.

Precedence, highest first: command line, environment, config file (``--config.file``), defaults.
Every setting has one dotted name used everywhere::

    --log.path            SGLANG_EXPORTER_LOG__PATH            [log] path = "..."
    --web.listen-address  SGLANG_EXPORTER_WEB__LISTEN_ADDRESS  [web] listen_address = "..."

A bad value raises :class:`SettingsError`, whose message names the setting; the command turns it
into exit code 2. pydantic-settings builds the sources from these models: its command-line source
on the root parser of :mod:`exporter.flags` (``--help``, placeholders, one-line errors; each field's
``json_schema_extra={"metavar": ...}`` is its placeholder), the environment, and its TOML source.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, ValidationInfo, field_validator
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError as _PydanticSettingsError,
    TomlConfigSettingsSource,
)

from .flags import PROG, UsageError, closest, command_line_source, settings_of
from .limits import (
    CHUNKED_PREFILL_SIZE_MAX,
    CHUNKED_PREFILL_SIZE_MIN,
    DECODE_LOG_INTERVAL_MAX,
    DECODE_LOG_INTERVAL_MIN,
    DEFAULT_DECODE_LOG_INTERVAL,
    DEFAULT_FPM_TIMEOUT,
    DEFAULT_GPU_CYCLE_TIMEOUT,
    DEFAULT_GPU_POLL_INTERVAL,
    DEFAULT_GPU_SLOW_POLL_INTERVAL,
    DEFAULT_GPU_UNKNOWN_ERROR_THRESHOLD,
    DEFAULT_IDLE_AFTER,
    DEFAULT_LOG_POLL_INTERVAL,
    DEFAULT_MAX_FILES_PER_GLOB,
    DEFAULT_MAX_LINE_BYTES,
    DEFAULT_OMNI_POLL_INTERVAL,
    DEFAULT_OMNI_TIMEOUT,
    DEFAULT_ROTATE_WAIT,
    MAX_FILES_PER_GLOB_MAX,
    MAX_FILES_PER_GLOB_MIN,
    MAX_LINE_BYTES_MAX,
    MAX_LINE_BYTES_MIN,
    MAX_SCHEDULERS,
)
from .paths import directory_problem
from .settings_file import SettingsError, check_file_keys, check_file_types, read_config_file
from .setting_values import (  # noqa: F401  (imported from here by the sources and the command)
    parse_http_url,
    parse_listen_address,
    parse_stage_intervals,
    parse_zmq_endpoint,
    same_zmq_endpoints,
)
from .sources.gpu.devices import parse_uuid_list

ENV_PREFIX = "SGLANG_EXPORTER_"
#: Default port: outside the 9100-9999 exporter registry range, not dcgm-exporter's 9400, not
#: SGLang's 30000 nor torch's 29400/29500, and below Linux's ephemeral range.
DEFAULT_PORT = 18400


def shorten(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to about ``limit`` characters, saying how long the whole was, for one-line
    error messages (an environment variable can hold 100 KB)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = f"{len(value)} characters" if isinstance(value, str) else f"{len(text)} characters as text"
    return f"{text[:limit]}... ({size})"


def split_commas(value: str | None) -> list[str]:
    """The items of a comma-separated setting, stripped (empty for None or "")."""
    return [p.strip() for p in value.split(",")] if value else []


def join_toml_array(value: Any) -> Any:
    """A TOML array of strings as one comma-separated string, like the flag and the variable give it."""
    if isinstance(value, (list, tuple)) and all(isinstance(p, str) for p in value):
        return ",".join(value)
    return value


class LogSettings(BaseModel):
    """``--log.*``: the SGLang log to follow, and the exporter's own logging."""

    model_config = ConfigDict(extra="forbid")

    path: Annotated[str | None, NoDecode] = Field(  # NoDecode: a repeated flag is a comma list
        None, json_schema_extra={"metavar": "PATH"},
        description="SGLang log file(s) to follow (the scheduler's output; need not "
        "exist yet): one path, or several paths and quoted globs separated by commas or given by repeating "
        "the flag (a TOML array in the file), e.g. '/logs/sglang.log,/logs/requests/*.log'. Required "
        "unless --demo.")
    from_beginning: bool = Field(
        False, description="Read an existing log from its first line at start-up. By default the exporter "
        "starts at the end of the file, so a restarted exporter never counts a line twice; the start-up "
        "facts of the server's last start before the end (or in its rotated files) are still applied.")
    poll_interval: float = Field(
        DEFAULT_LOG_POLL_INTERVAL, gt=0, le=60, json_schema_extra={"metavar": "SECONDS"},
        description="Seconds between checks of the file when no file event arrives.")
    watch_mode: Literal["inotify", "poll"] = Field(
        "inotify", description="How changes are noticed: inotify (file events, plus the poll timer) or poll "
        "(timer only; use on NFS, CIFS and some overlay mounts).")
    rotate_wait: float = Field(
        DEFAULT_ROTATE_WAIT, ge=0, le=3600, json_schema_extra={"metavar": "SECONDS"},
        description="Seconds a rotated or deleted log file is still read after the path "
        "names a new file (the writer appends to the old one until it reopens its log).")
    max_line_bytes: int = Field(
        DEFAULT_MAX_LINE_BYTES, ge=MAX_LINE_BYTES_MIN, le=MAX_LINE_BYTES_MAX,
        json_schema_extra={"metavar": "BYTES"},
        description="Longest log line kept (1 KiB .. 64 MiB); longer lines are dropped and counted.")
    max_files_per_glob: int = Field(
        DEFAULT_MAX_FILES_PER_GLOB, ge=MAX_FILES_PER_GLOB_MIN, le=MAX_FILES_PER_GLOB_MAX,
        json_schema_extra={"metavar": "N"},
        description="Most files one --log.path glob follows (each costs a file descriptor and seven "
        "series); beyond it the most recently modified are followed, the rest skipped with a warning "
        "and counted in sglang_exporter_log_glob_skipped_files. --one-shot reads every match, one at a time.")
    level: Literal["debug", "info", "warning", "error"] = Field(
        "info", description="Level of the exporter's own logging (debug shows each malformed line).")

    @property
    def paths(self) -> list[str]:
        """The paths and globs of ``path``, split at commas (empty without one)."""
        return split_commas(self.path)

    @field_validator("path", mode="before")
    @classmethod
    def _join_paths(cls, value: Any) -> Any:
        return join_toml_array(value)

    @field_validator("path")
    @classmethod
    def _check_paths(cls, value: str | None) -> str | None:
        if value is None:
            return value
        for p in (p.strip() for p in value.split(",")):
            if not p:
                raise ValueError("an empty path was given (check for a stray comma)")
            if "\0" in p:
                raise ValueError(f"a path cannot contain a NUL byte, got {p!r}")
            if os.path.isdir(p):
                raise ValueError(f"{p!r} {directory_problem(p)}")
        return value


class WebSettings(BaseModel):
    """``--web.*``: the HTTP endpoint."""

    model_config = ConfigDict(extra="forbid")

    listen_address: str = Field(
        f":{DEFAULT_PORT}", json_schema_extra={"metavar": "HOST:PORT"},
        description=f"HOST:PORT to serve on; ':{DEFAULT_PORT}' listens on every interface (--demo without "
        f"this setting: 127.0.0.1:{DEFAULT_PORT} only), '127.0.0.1:0' picks a free loopback port, '[::1]:PORT' "
        "for IPv6.")
    telemetry_path: str = Field("/metrics", json_schema_extra={"metavar": "URL_PATH"},
                                description="Path under which metrics are served.")
    config_file: str | None = Field(
        None, json_schema_extra={"metavar": "PATH", "aliases": ("--web.config.file",)},
        description="YAML file in the exporter-toolkit's web configuration format (node_exporter's "
        "--web.config.file): tls_server_config (cert_file, key_file, client_ca_file, client_auth_type, "
        "min_version), basic_auth_users (bcrypt hashes), http_server_config.headers. Certificates are "
        "re-read when their files change; /healthz needs no password. Default: plain HTTP, no authentication.")

    @field_validator("config_file")
    @classmethod
    def _check_config_file(cls, value: str | None) -> str | None:
        if value is not None:
            from .webconfig import WebConfigError, load_web_config

            try:
                load_web_config(value)
            except WebConfigError as exc:
                raise ValueError(str(exc)) from None
        return value

    @field_validator("listen_address")
    @classmethod
    def _check_address(cls, value: str) -> str:
        parse_listen_address(value)
        return value

    @field_validator("telemetry_path")
    @classmethod
    def _check_path(cls, value: str) -> str:
        if not value.startswith("/") or value in ("/", "/healthz") or any(c.isspace() for c in value):
            raise ValueError("must be a path starting with '/', other than '/' and '/healthz'")
        if "?" in value or "#" in value:  # a request's path never holds them: nothing would be served
            raise ValueError(f"must be a path without a query ('?') or fragment ('#'), got {shorten(value)}")
        return value


class SglangSettings(BaseModel):
    """``--sglang.*``: facts about the SGLang server that its log may not state."""

    model_config = ConfigDict(extra="forbid")

    decode_log_interval: int = Field(
        DEFAULT_DECODE_LOG_INTERVAL, ge=DECODE_LOG_INTERVAL_MIN, le=DECODE_LOG_INTERVAL_MAX,
        json_schema_extra={"metavar": "STEPS"},
        description="Decode steps per 'Decode batch' line (SGLang's "
        "--decode-log-interval). A decode_log_interval value in the log's server_args line wins; "
        "when neither gives it, SGLang's default is assumed, labelled source=\"default\" and warned about "
        "(SGLang Omni never prints server_args: set it there, or per stage below).")
    stage_decode_log_intervals: str | None = Field(
        None, json_schema_extra={"metavar": "STAGE=STEPS,..."},
        description="SGLang Omni: each stage's decode steps per 'Decode batch' line (Omni's "
        "--<stage>.engine.decode_log_interval), e.g. 'thinker=1,talker_ar=1'. Omni prints no server_args and "
        "its /model_info does not serve the interval, so only the deployment knows it. A stage named here "
        "is labelled source=\"setting\"; any other stage takes --sglang.decode-log-interval.")
    chunked_prefill_size: int | None = Field(
        None, ge=CHUNKED_PREFILL_SIZE_MIN, le=CHUNKED_PREFILL_SIZE_MAX, json_schema_extra={"metavar": "TOKENS"},
        description="SGLang's --chunked-prefill-size, used only when the log "
        "has neither the start-up capacity line nor server_args (a log excerpt, or a log whose start was "
        "rotated away with its rotated files). It lets admitted requests discount the continuing chunk of a chunked "
        "prefill; without it #new-seq is summed as is (an upper bound).")
    @field_validator("stage_decode_log_intervals")
    @classmethod
    def _check_stage_intervals(cls, value: str | None) -> str | None:
        if value is not None:
            parse_stage_intervals(value)
        return value

    idle_after: float = Field(
        DEFAULT_IDLE_AFTER, gt=0, le=86400, json_schema_extra={"metavar": "SECONDS"},
        description="Seconds without a Prefill/Decode line after which a scheduler's "
        "latest-line gauges (running, queue, KV usage, ...) are no longer exported: SGLang prints "
        "nothing while idle, so the last values would be stale.")
    fine_buckets: bool = Field(
        False, description="Serve every bucket of the batch-size and prefill-token histograms (115 and 213 "
        "bounds, each at most 5 percent wide, up to 1,024 requests and 131,072 tokens) instead of the series "
        "budget's: batch sizes up to the server's max_running_requests, tokens per prefill batch one bucket "
        "per power of two (docs/metrics.md, 'Series budget per scheduler'). For a deep dive: about 540 "
        "series per scheduler instead of 130 to 360.")


class GpuSettings(BaseModel):
    """``--gpu.*``: the NVML collector (``sglang_gpu_*``). Not used in --one-shot mode."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(
        True, description="Poll NVML for GPU readings (sglang_gpu_*). '--gpu.enabled false' turns the "
        "collector off. Never used with --one-shot: a recorded log says nothing about this machine's GPUs.")
    poll_interval: float = Field(
        DEFAULT_GPU_POLL_INTERVAL, gt=0, le=3600, json_schema_extra={"metavar": "SECONDS"},
        description="Seconds between NVML polls; /metrics serves the latest snapshot "
        "and never waits for NVML.")
    cycle_timeout: float = Field(
        DEFAULT_GPU_CYCLE_TIMEOUT, gt=0, le=3600, json_schema_extra={"metavar": "SECONDS"},
        description="Deadline in seconds for one poll cycle; a cycle that overruns (a hung "
        "NVML call) is counted, the snapshot is marked stale and sglang_gpu_up drops to 0.")
    slow_poll_interval: float = Field(
        DEFAULT_GPU_SLOW_POLL_INTERVAL, gt=0, le=86400, json_schema_extra={"metavar": "SECONDS"},
        description="Seconds between reads of the slow-moving counters (ECC errors, "
        "remapped rows) and device re-enumeration.")
    uuids: str | None = Field(
        None, json_schema_extra={"metavar": "UUID,..."},
        description="Comma-separated GPU-... or MIG-... UUIDs to report (a GPU UUID includes its MIG "
        "devices); default: every GPU NVML sees.")
    uuids_file: str | None = Field(
        None, json_schema_extra={"metavar": "PATH"},
        description="File of UUIDs (one per line or comma-separated, '#' comments), e.g. written by "
        "the server container's entrypoint to a shared volume; re-read when it changes, and until it "
        "exists no GPU is reported. Combined with --gpu.uuids.")
    nvml_library_path: str | None = Field(
        None, json_schema_extra={"metavar": "PATH"},
        description="Path of libnvidia-ml.so.1 when it is not on the loader's path (e.g. a driver "
        "directory mounted from the host).")
    unknown_error_threshold: int = Field(
        DEFAULT_GPU_UNKNOWN_ERROR_THRESHOLD, ge=0, le=1000, json_schema_extra={"metavar": "CYCLES"},
        description="Consecutive poll cycles with an NVML 'Unknown' error (typically: the "
        "container lost access to the device) after which /healthz answers 503 so that Kubernetes restarts "
        "the pod; 0 never fails /healthz for it.")
    xid_events: bool = Field(
        True, description="Count XID errors from an NVML event set (sglang_gpu_xid_errors_total).")

    @field_validator("uuids")
    @classmethod
    def _check_uuids(cls, value: str | None) -> str | None:
        if value is not None:
            parse_uuid_list(value)
        return value

    @field_validator("cycle_timeout")
    @classmethod
    def _check_timeout(cls, value: float, info: ValidationInfo) -> float:
        interval = info.data.get("poll_interval")
        if interval is not None and value > interval:
            raise ValueError(f"must not exceed gpu.poll-interval ({interval}); got {value}")
        return value


class FpmSettings(BaseModel):
    """``--fpm.*``: SGLang's per-forward-pass stream (``sglang_scheduler_forward_pass*``). Not used in
    --one-shot mode."""

    model_config = ConfigDict(extra="forbid")

    endpoints: Annotated[str | None, NoDecode] = Field(  # NoDecode: a repeated flag is a comma list
        None, json_schema_extra={"metavar": "ENDPOINT,..."},
        description="ZeroMQ endpoints of SGLang's forward-pass metrics publishers (SGLang run with "
        "--enable-forward-pass-metrics), one per DP rank, separated by commas or given by repeating the "
        "flag: 'ipc:///run/sglang-fpm/fpm.0' (SGLang appends .<dp_rank> to --forward-pass-metrics-ipc-name) "
        "or 'tcp://127.0.0.1:20380'. Connected lazily: the server need not be up yet. Default: off.")
    timeout: float = Field(
        DEFAULT_FPM_TIMEOUT, gt=0, le=3600, json_schema_extra={"metavar": "SECONDS"},
        description="Seconds without a forward pass or heartbeat (SGLang sends one "
        "every second while idle) after which an endpoint is down (sglang_exporter_fpm_up 0) and its "
        "scheduler's queue gauges are withheld.")

    @property
    def endpoint_list(self) -> list[str]:
        """The endpoints of ``endpoints``, split at commas (empty without one)."""
        return split_commas(self.endpoints)

    @field_validator("endpoints", mode="before")
    @classmethod
    def _join_endpoints(cls, value: Any) -> Any:
        return join_toml_array(value)

    @field_validator("endpoints")
    @classmethod
    def _check_endpoints(cls, value: str | None) -> str | None:
        if value is None:
            return value
        seen: set[str] = set()
        places: list[tuple[str, str, str]] = []
        for e in (e.strip() for e in value.split(",")):
            transport, address = parse_zmq_endpoint(e)
            if e in seen:
                raise ValueError(f"{e!r} is given twice")
            seen.add(e)
            places.append((e, transport, address))
        if len(seen) > MAX_SCHEDULERS:
            raise ValueError(f"at most {MAX_SCHEDULERS} endpoints (one per DP rank), got {len(seen)}")
        same = same_zmq_endpoints(places)
        if same:
            raise ValueError(f"{same[0]!r} and {same[1]!r} are the same endpoint (its messages would be counted twice)")
        return value


class OmniSettings(BaseModel):
    """``--omni.*``: SGLang Omni's endpoints (``sglang_omni_*`` live per-stage snapshot). Not used in
    --one-shot mode."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = Field(
        None, json_schema_extra={"metavar": "URL"},
        description="Base URL of the SGLang Omni API server to poll, e.g. 'http://127.0.0.1:8000': GET /health "
        "(pipeline) and GET /model_info (per stage: waiting queue, running batch, request builds, paused). "
        "The server need not be up yet. Default: off. Omni's scheduler lines are read from --log.path either way.")
    poll_interval: float = Field(
        DEFAULT_OMNI_POLL_INTERVAL, gt=0, le=3600, json_schema_extra={"metavar": "SECONDS"},
        description="Seconds between polls; /metrics serves the latest answer and never waits for Omni "
        "(each /model_info is served by every stage's scheduler thread, so keep it at seconds, not less).")
    timeout: float = Field(
        DEFAULT_OMNI_TIMEOUT, gt=0, le=3600, json_schema_extra={"metavar": "SECONDS"},
        description="Deadline in seconds of one poll (both requests); past it the poll counts as a timeout, "
        "sglang_omni_up drops to 0 and the per-stage snapshot is withheld.")
    admin_key_file: str | None = Field(
        None, json_schema_extra={"metavar": "PATH"},
        description="File holding SGLang Omni's admin key (its first line), sent as 'Authorization: Bearer' to "
        "/model_info; re-read every poll (a mounted Secret). Default: the environment variable "
        "SGLANG_OMNI_ADMIN_KEY, which Omni itself reads; neither is needed when Omni runs without an admin key.")

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is not None:
            parse_http_url(value)
        return value

    @field_validator("timeout")
    @classmethod
    def _check_timeout(cls, value: float, info: ValidationInfo) -> float:
        interval = info.data.get("poll_interval")
        if interval is not None and value > interval:
            raise ValueError(f"must not exceed omni.poll-interval ({interval}); got {value}")
        return value


class ConfigSettings(BaseModel):
    """``--config.file``: where more settings come from."""

    model_config = ConfigDict(extra="forbid")

    file: str | None = Field(
        None, json_schema_extra={"metavar": "PATH"},
        description="TOML file with these settings in tables, e.g. '[log]' then 'path = "
        "\"/logs/sglang.log\"'. Flags and environment variables win over it.")


class Settings(BaseSettings):
    """Prometheus exporter for SGLang and SGLang Omni: reads the server's scheduler log (batch sizes,
    queue, KV-cache usage, retractions; one scheduler per Omni stage), with --fpm.endpoints its
    per-forward-pass stream (exact batch sizes), with --omni.url SGLang Omni's per-stage snapshot,
    and serves them as metrics. Every setting is a flag, an environment variable
    SGLANG_EXPORTER_<GROUP>__<NAME> (e.g. SGLANG_EXPORTER_LOG__PATH) and a key of the TOML file of
    --config.file ([log] then path = "..."); flags win over variables, which win over the file. A
    boolean flag alone means true, or takes a value: --gpu.enabled false, --demo=no, --no-demo."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        nested_model_default_partial_update=True,
        extra="forbid",
    )

    log: LogSettings = LogSettings()
    web: WebSettings = WebSettings()
    sglang: SglangSettings = SglangSettings()
    gpu: GpuSettings = GpuSettings()
    fpm: FpmSettings = FpmSettings()
    omni: OmniSettings = OmniSettings()
    config: ConfigSettings = ConfigSettings()
    one_shot: bool = Field(
        False, description="Read --log.path from its beginning to its end, print every metric in the "
        "Prometheus text format to stdout and exit 0. No HTTP server, and no GPU metrics (NVML describes this "
        "machine now, not the recorded log).")
    demo: bool = Field(
        False, description="Replay the bundled sample log (real SGLang lines) into a temporary file at "
        "its recorded pace, in a loop, and serve live metrics from it. No GPU or SGLang needed.")

    #: ``(group, name)`` of every setting a flag, a variable or the file gave (:meth:`given`).
    _given: frozenset = PrivateAttr(default=frozenset())

    def given(self, group: str, name: str) -> bool:
        """True when a flag, an ``SGLANG_EXPORTER_*`` variable or the config file gave the setting
        (fields merged with their defaults cannot tell: ``nested_model_default_partial_update``)."""
        return (group, name) in self._given

    @classmethod
    def settings_customise_sources(cls, settings_cls, init_settings, env_settings, dotenv_settings,
                                   file_secret_settings):
        return (init_settings, _known_environment(settings_cls, env_settings),
                _ConfigFileSource(settings_cls, toml_file=_CONFIG_FILE))


#: Every setting, in the order of ``--help`` and of the table in docs/configuration.md.
SETTINGS = settings_of(Settings, ENV_PREFIX)


_CONFIG_FILE: Path | None = None


def _known_environment(settings_cls, env_settings: PydanticBaseSettingsSource) -> PydanticBaseSettingsSource:
    """The environment's values without the unknown names of a known group.

    pydantic-settings reads ``SGLANG_EXPORTER_GPU__ENABLE`` (no D) as a key ``enable`` of ``gpu`` and
    would refuse it; it is dropped here like every other variable that is not a setting
    (``SGLANG_EXPORTER_LOG_PATH`` is never read at all), and :func:`unknown_environment` warns
    about each, naming the variable meant.
    """
    data = env_settings()
    for group, table in data.items():
        model = Settings.model_fields[group].annotation if group in Settings.model_fields else None
        if isinstance(table, dict) and isinstance(model, type) and issubclass(model, BaseModel):
            data[group] = {k: v for k, v in table.items() if k in model.model_fields}
    return InitSettingsSource(settings_cls, init_kwargs=data)


class _ConfigFileSource(TomlConfigSettingsSource):
    """pydantic-settings' TOML source for the file of ``--config.file``, read within our limits.

    Raises:
        SettingsError: the file is missing (pydantic-settings would skip it), unreadable, not a small
            regular file, not UTF-8, not valid TOML, or has an unknown key or a value of the wrong type;
            the message names the file.
    """

    def _read_files(self, files: Any, deep_merge: bool = False) -> dict[str, Any]:
        return self._read_file(Path(files)) if files is not None else {}

    def _read_file(self, path: Path) -> dict[str, Any]:
        data = read_config_file(path)
        check_file_keys(data, path, _file_keys())
        check_file_types(data, path, Settings.model_fields, _names)
        _FILE_GIVEN.update((group, name) for group, table in data.items() if isinstance(table, dict)
                           for name in table)
        return data


#: ``(group, name)`` of the settings the config file gave, filled while the file is read.
_FILE_GIVEN: set[tuple[str, str]] = set()


def _file_keys() -> dict[str | None, list[str]]:
    """The valid keys of the config file by table (``None``: the top level, whose keys include the tables)."""
    keys: dict[str | None, list[str]] = {None: list(Settings.model_fields)}
    for s in SETTINGS:
        if s.group is not None:
            keys.setdefault(s.group, []).append(s.name)
    return keys


#: Most unknown ``SGLANG_EXPORTER*`` variables warned about one by one; more get one line in all.
UNKNOWN_ENVIRONMENT_SHOWN = 5


def unknown_environment(environ: dict[str, str] | os._Environ) -> list[str]:
    """Warnings for environment variables that look like settings but are none (they are ignored).

    A variable whose name starts with ``SGLANG_EXPORTER`` (any case) and is not a setting's variable
    (``SGLANG_EXPORTER_LOG__PATH``) nor a group's (``SGLANG_EXPORTER_LOG``, which pydantic-settings
    reads as JSON) gets one warning naming the variable meant, when one is close: a single underscore
    (``SGLANG_EXPORTER_LOG_PATH``), a misspelt group or name.

    Returns:
        One message per such variable, sorted by name; past :data:`UNKNOWN_ENVIRONMENT_SHOWN` of them,
        a single message giving their number and the first few names.
    """
    known = [s.env for s in SETTINGS] + [ENV_PREFIX + g.upper() for g in _file_keys() if g is not None]
    unknown = [name for name in sorted(environ)
               if name.upper().startswith(ENV_PREFIX.rstrip("_")) and name.upper() not in known]
    listing = f"the variables are {ENV_PREFIX}<GROUP>__<NAME>, listed by {PROG} --help"
    if len(unknown) > UNKNOWN_ENVIRONMENT_SHOWN:  # thousands of names: one line, not a megabyte of warnings
        shown = ", ".join(shorten(name, 60).strip("'") for name in unknown[:UNKNOWN_ENVIRONMENT_SHOWN])
        return [f"{len(unknown)} environment variables are not settings and are ignored: {shown} and "
                f"{len(unknown) - UNKNOWN_ENVIRONMENT_SHOWN} more; {listing}"]
    warnings = []
    for name in unknown:
        guess = closest(name.upper().removeprefix(ENV_PREFIX), [k.removeprefix(ENV_PREFIX) for k in known])
        hint = f"did you mean {ENV_PREFIX}{guess}?" if guess else listing
        warnings.append(f"environment variable {shorten(name, 100).strip(chr(39))} is not a setting and is "
                        f"ignored; {hint}")
    return warnings


def _names(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if isinstance(p, str)]
    dotted = ".".join(p.replace("_", "-") for p in parts)
    env = ENV_PREFIX + "__".join(p.upper() for p in parts)
    return f"{'.'.join(parts) or 'settings'} (--{dotted}, {env})"


def load_settings(argv: list[str] | None = None) -> Settings:
    """Build :class:`Settings` from ``argv`` (default ``sys.argv[1:]``), the environment and the file.

    ``--help`` and ``--version`` print and exit 0 (:class:`SystemExit`).

    Raises:
        SettingsError: an argument the command line cannot take (one line naming the flag, pointing
            to ``--help``), a bad config file, or an invalid value (the message names the setting).
    """
    global _CONFIG_FILE
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    source = command_line_source(Settings, SETTINGS, inspect.cleandoc(Settings.__doc__ or ""))
    try:
        cli = source(args=args)()  # {"log": {"path": "x"}, "demo": "true"}: strings, checked by the model
    except UsageError as exc:
        raise SettingsError(f"{exc} (see {PROG} --help)") from None
    config_file = cli.get("config", {}).get("file") or os.environ.get(ENV_PREFIX + "CONFIG__FILE")
    _CONFIG_FILE = Path(config_file) if config_file else None
    _FILE_GIVEN.clear()
    try:
        settings = Settings(_cli_settings_source=source)
        given = {(group, name) for group, table in cli.items() if isinstance(table, dict) for name in table}
        given |= {(s.group, s.name) for s in SETTINGS if s.group is not None and s.env in os.environ}
        settings._given = frozenset(given | _FILE_GIVEN)
        return settings
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            msg = err.get("msg", "invalid value").removeprefix("Value error, ")
            if err.get("type") == "bool_parsing":
                msg = "must be true or false (or yes/no, on/off, 1/0)"
            got = "" if "got" in msg else f" (got {shorten(err.get('input'))})"
            problems.append(f"setting {_names(tuple(err.get('loc', ())))}: {msg}{got}")
        raise SettingsError("; ".join(problems)) from None
    except _PydanticSettingsError as exc:
        raise SettingsError(f"settings: {exc}") from None
    finally:
        _CONFIG_FILE = None
