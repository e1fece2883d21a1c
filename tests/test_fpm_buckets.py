"""Requests-per-pass buckets answer p50/p90/p99 within max(1 request, 5%) for batch sizes 1..1024.

``histogram_quantile`` here is Prometheus' algorithm (tests/histogram_quantile.py), itself checked
against the real promtool below.
"""

from __future__ import annotations

import math
import random
import subprocess
import textwrap

from histogram_quantile import exact_percentile, histogram_quantile, within
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.metrics.buckets import REQUESTS_BUCKETS, relative_bounds
from exporter.sources.fpm.stats import Buckets

QUANTILES = (0.5, 0.9, 0.99)


def _cumulative(values: list[int]) -> dict[float, float]:
    b = Buckets(REQUESTS_BUCKETS, table=True)
    for v in values:
        b.observe(v)
    return dict(zip([*REQUESTS_BUCKETS, math.inf], b.cumulative()))


def _check(values: list[int]) -> None:
    buckets = _cumulative(values)
    for q in QUANTILES:
        exact = exact_percentile(q, values)
        est = histogram_quantile(q, buckets)
        assert within(est, exact), (q, exact, est)


def test_bucket_widths_follow_the_rule():
    bounds = relative_bounds(1024)
    assert bounds[0] == 1 and bounds[-1] >= 1024
    for low, high in zip(bounds, bounds[1:]):
        assert high - low == max(1, int(0.05 * (low + 1)))
    # The series budget the docs state: 111 bounds to 1024, 4 coarse ones above, +Inf, _sum, _count.
    assert len(bounds) == 111 and len(REQUESTS_BUCKETS) == 115


def test_every_single_value_and_uniform_ranges():
    for v in range(1, 1025):
        _check([v] * 3)
    for top in (1, 2, 7, 40, 100, 128, 256, 500, 1000, 1024):
        _check(list(range(1, top + 1)))


def test_hard_cases_values_at_bucket_edges():
    rng = random.Random(14)
    for _ in range(300):
        i = rng.randrange(len(REQUESTS_BUCKETS) - 5)
        low, high = REQUESTS_BUCKETS[i], REQUESTS_BUCKETS[i + 1]
        # Mass on the upper edge and one just above the lower edge: interpolation's worst case.
        values = [high] * rng.randrange(1, 50) + [low + 1] * rng.randrange(1, 50)
        values += [rng.randint(1, 1024) for _ in range(rng.randrange(0, 20))]
        _check([v for v in values if v <= 1024])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=1024), min_size=1, max_size=400))
def test_any_distribution_of_batch_sizes(values):
    _check(values)


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=1, max_value=1024), st.integers(min_value=1, max_value=200),
       st.floats(min_value=0.0, max_value=3.0))
def test_skewed_distributions(center, spread, skew):
    rng = random.Random(center * 7919 + spread)
    values = [max(1, min(1024, int(center + spread * rng.gauss(0, 1) * (1 + skew * rng.random()))))
              for _ in range(500)]
    _check(values)


def test_our_histogram_quantile_is_prometheus(tmp_path, promtool):
    """promtool evaluates histogram_quantile on the same buckets and must give the same numbers."""
    rng = random.Random(5)
    cases = [[1 + i % 100 for i in range(1000)], [rng.randint(1, 1024) for _ in range(777)],
             [3] * 10 + [900] * 3, [1] * 50]
    series, tests = [], []
    for n, values in enumerate(cases):
        buckets = _cumulative(values)
        for le, count in buckets.items():
            le_s = "+Inf" if le == math.inf else repr(float(le))
            series.append(f"      - series: 'fpm_bucket{{case=\"{n}\",le=\"{le_s}\"}}'\n"
                          f"        values: '{count:g}'")
        for q in QUANTILES:
            ours = histogram_quantile(q, buckets)
            tests.append(f"      - expr: histogram_quantile({q}, fpm_bucket{{case=\"{n}\"}})\n"
                         f"        eval_time: 0m\n"
                         f"        exp_samples:\n"
                         f"          - labels: '{{case=\"{n}\"}}'\n"
                         f"            value: {ours!r}")
    test_file = tmp_path / "quantile.test.yml"
    test_file.write_text(textwrap.dedent("""\
        rule_files: []
        evaluation_interval: 1m
        tests:
          - interval: 1m
            input_series:
        """) + "\n".join(series) + "\n    promql_expr_test:\n" + "\n".join(tests) + "\n")
    r = subprocess.run([promtool, "test", "rules", str(test_file)], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
