"""The bounds of exporter.limits are the ones every module applies (none restates its own)."""

from __future__ import annotations

import pytest

from exporter import limits
from exporter.report.kv import config_number
from exporter.sources.log.parser import Malformed, parse_line
from exporter.settings import SettingsError, load_settings
from exporter.status import ExitStatus


@pytest.mark.parametrize("text, accepted", [
    ("999999999999999", True),       # 15 digits, just below MAX_VALUE
    ("1000000000000000", False),     # MAX_VALUE itself (16 digits)
    ("0", True),
    ("-1", False),
    ("nan", False),
    ("inf", False),
    ("\uff15", False),              # a fullwidth 5: float() reads it, SGLang never prints it
    ("0.\u0665", False),            # Arabic-Indic
])
def test_parser_and_report_accept_the_same_values(text, accepted):
    line = f"[2026-01-01 00:00:00] Decode batch, #running-req: 1, #token: 1, token usage: 0.01, gen throughput (token/s): {text}, #queue-req: 0"
    assert (type(parse_line(line)) is not Malformed) is accepted
    assert (config_number(text) is not None) is accepted


def test_settings_ranges_are_the_limits():
    lo, hi = limits.DECODE_LOG_INTERVAL_MIN, limits.DECODE_LOG_INTERVAL_MAX
    assert load_settings(["--demo", f"--sglang.decode-log-interval={hi}"]).sglang.decode_log_interval == hi
    for bad in (lo - 1, hi + 1):
        with pytest.raises(SettingsError, match="decode-log-interval"):
            load_settings(["--demo", f"--sglang.decode-log-interval={bad}"])
    for bad in (limits.MAX_LINE_BYTES_MIN - 1, limits.MAX_LINE_BYTES_MAX + 1):
        with pytest.raises(SettingsError, match="max-line-bytes"):
            load_settings(["--demo", f"--log.max-line-bytes={bad}"])
    assert load_settings(["--demo"]).log.max_line_bytes == limits.DEFAULT_MAX_LINE_BYTES


def test_server_args_interval_outside_the_range_is_damage():
    over = limits.DECODE_LOG_INTERVAL_MAX + 1
    assert type(parse_line(f"[2026-01-01 00:00:00] server_args=ServerArgs(decode_log_interval={over})")) is Malformed
    ok = parse_line(f"[2026-01-01 00:00:00] server_args=ServerArgs(decode_log_interval={limits.DECODE_LOG_INTERVAL_MAX})")
    assert ok.decode_log_interval == limits.DECODE_LOG_INTERVAL_MAX


def test_exit_statuses_are_the_documented_codes():
    assert [int(s) for s in ExitStatus] == [0, 1, 2, 3, 130]
