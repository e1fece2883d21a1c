"""Bounds and defaults that several modules must agree on, declared once.

The parser, the scheduler state, the settings and the report all import from here; none restates a
value. Each bound says why it is what it is.
"""

from __future__ import annotations

#: Values a log field may take: ``0 <= x < MAX_VALUE``. SGLang prints no count, size, ratio or rate
#: near this; a larger value is damage (and beyond 2**53 a float counter would stop counting). A
#: figure derived from one line (decode tokens = ``#running-req`` x interval x ``accept len``, the
#: queue integral's step, a recompute estimate) is held to the same bound: the scheduler state
#: refuses the line rather than let one product poison a counter.
MAX_VALUE = 1e15
#: Digits of the longest count accepted (``MAX_VALUE`` has 16 digits, so 15 keep a count below it).
MAX_COUNT_DIGITS = 15

#: ``--decode-log-interval`` (SGLang's, default 40): decode steps per ``Decode batch`` line.
DEFAULT_DECODE_LOG_INTERVAL = 40
#: Accepted range of the decode-log interval, inclusive, from the log's ``server_args`` or a setting.
DECODE_LOG_INTERVAL_MIN, DECODE_LOG_INTERVAL_MAX = 1, 100_000

#: Accepted range of SGLang's ``--chunked-prefill-size`` given as a setting or report option, inclusive
#: (SGLang's ``-1``, "chunked prefill off", is no size: leave the setting unset).
CHUNKED_PREFILL_SIZE_MIN, CHUNKED_PREFILL_SIZE_MAX = 1, 10_000_000

#: Longest log line kept by default (bytes); longer lines are dropped and counted.
DEFAULT_MAX_LINE_BYTES = 1 << 20
#: Accepted range of ``--log.max-line-bytes``, inclusive.
MAX_LINE_BYTES_MIN, MAX_LINE_BYTES_MAX = 1 << 10, 64 << 20

#: Seconds a rotated or deleted log file is still read (``--log.rotate-wait``; fluent-bit's
#: ``rotate_wait`` is 5): the writer appends to the old file until it reopens its log.
DEFAULT_ROTATE_WAIT = 5.0
#: Seconds between checks of the log paths when no file event arrives (``--log.poll-interval``).
DEFAULT_LOG_POLL_INTERVAL = 1.0
#: Most files one ``--log.path`` glob follows (``--log.max-files-per-glob``): each costs a file
#: descriptor, a check per poll and seven series; SGLang writes one log per server or rank.
DEFAULT_MAX_FILES_PER_GLOB = 100
#: Accepted range of ``--log.max-files-per-glob``, inclusive.
MAX_FILES_PER_GLOB_MIN, MAX_FILES_PER_GLOB_MAX = 1, 100_000

#: Seconds without a Prefill/Decode line after which a scheduler's latest-line gauges are withheld
#: (``--sglang.idle-after``): SGLang prints nothing while idle, so the last values would be stale.
DEFAULT_IDLE_AFTER = 60.0

#: NVML polling defaults (``--gpu.*``): seconds between polls, the deadline of one poll cycle, seconds
#: between reads of the slow counters (ECC, remapped rows), and consecutive cycles with an NVML
#: ``Unknown`` error after which ``/healthz`` fails.
DEFAULT_GPU_POLL_INTERVAL = 10.0
DEFAULT_GPU_CYCLE_TIMEOUT = 5.0
DEFAULT_GPU_SLOW_POLL_INTERVAL = 300.0
DEFAULT_GPU_UNKNOWN_ERROR_THRESHOLD = 3

#: Seconds without a forward pass or heartbeat after which an FPM endpoint is down (``--fpm.timeout``;
#: SGLang sends a heartbeat every second while idle).
DEFAULT_FPM_TIMEOUT = 5.0

#: SGLang Omni polling defaults (``--omni.*``): seconds between polls of ``/health`` and ``/model_info``
#: (a poll of ``/model_info`` is served by every stage's scheduler thread), and the deadline of one poll.
DEFAULT_OMNI_POLL_INTERVAL = 10.0
DEFAULT_OMNI_TIMEOUT = 5.0

#: Longest gap between two samples of ``#queue-req`` that a time integral trusts (seconds). SGLang
#: prints nothing while idle, so a longer silence is idle time (or a stall), not "the last queue
#: length held all along". The exporter and the report cap idle gaps alike.
QUEUE_SAMPLE_MAX_GAP_SECONDS = 60.0

#: Most schedulers tracked, and so the bound of a DP rank tag when the log has no ``server_args``
#: (every possible rank has a slot: garbage tags cannot lock real ranks out). Each scheduler adds
#: at most about 550 series (the budget of docs/metrics.md); real DP sizes are far below this.
MAX_SCHEDULERS = 256
#: Most replicas (distinct PP/ATTN_CP/MOE_DP/TP/EP tag sets) tracked over all schedulers together
#: (each holds its own counters and histograms, about 4 KB, and as much again in a scrape's snapshot:
#: docs/kubernetes.md, resources).
MAX_REPLICAS = 4096

#: Largest settings file read (a TOML file of settings is a few hundred bytes).
CONFIG_FILE_MAX_BYTES = 1 << 20
#: Largest GPU UUID file read (--gpu.uuids-file: every GPU and MIG device of a node is a few KiB).
UUIDS_FILE_MAX_BYTES = 64 << 10


def in_value_range(x: float) -> bool:
    """True when ``x`` is a value SGLang can print: finite and ``0 <= x < MAX_VALUE`` (NaN is not)."""
    return 0.0 <= x < MAX_VALUE
