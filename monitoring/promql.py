"""PromQL and wording helpers shared by the rules, the alerts and the dashboards.

The one idiom worth a name is :func:`per_group`: read a raw scheduler series of every pod, give a
target without the group label a group of its own (its ``instance``), and merge the pods of one group
with ``max`` (every sidecar of a multi-node server counts the same retractions; a sum would multiply
them). docs/runbook.md, "Multi-node groups", explains it for users.
"""

from __future__ import annotations

from collections.abc import Callable

from .config import Config


#: Histograms of whole numbers (requests per batch) with whole-number bucket bounds: their
#: ``histogram_quantile`` is rounded up (``ceil``). Prometheus interpolates linearly inside a bucket
#: ``(n-1, n]``, so every batch of 1 request reads as a p50 of 0.5; rounded up it is 1, and in general
#: the rounded value lies within the bucket's whole numbers, never below every observation.
WHOLE_HISTOGRAMS = ("sglang_scheduler_batch_size", "sglang_scheduler_forward_pass_requests")


def whole_quantile(expr: str) -> str:
    """A ``histogram_quantile`` expression of a :data:`WHOLE_HISTOGRAMS` histogram, rounded up."""
    return f"ceil(\n{indent(expr)}\n)"


def selector(metric: str, *matchers: str) -> str:
    """``metric{m1, m2}`` (no braces when there is no matcher); empty matchers are skipped."""
    inner = ", ".join(m for m in matchers if m)
    return f"{metric}{{{inner}}}" if inner else metric


def indent(text: str, by: int = 2) -> str:
    """Indent every line of a (multi-line) expression."""
    return "\n".join(" " * by + line for line in text.splitlines())


def by(cfg: Config, *split: str) -> str:
    """``namespace, sglang_group, dp_rank[, split...]``: the labels of one recorded scheduler, and the
    join of its sources."""
    return ", ".join((*cfg.group_by, *split))


def _label_replace(expr: str, dst: str, replacement: str, src: str, regex: str) -> str:
    return f'label_replace({expr}, "{dst}", "{replacement}", "{src}", "{regex}")'


def _scheduler_defaults(cfg: Config, expr: str) -> str:
    """Give a series of SGLang's own metrics the scheduler labels it lacks (no dp_rank with one DP
    rank becomes dp_rank="0", as the sidecar writes it)."""
    for label, value in cfg.scheduler_label_defaults.items():
        if label in cfg.scheduler_labels:
            expr = _label_replace(expr, label, value, label, "")
    return expr


def _group_default(cfg: Config, expr: str) -> str:
    """``sglang_group`` from the first non-empty label of ``group_default_from`` (pod, else instance)."""
    for label in reversed(cfg.group_default_from):
        expr = _label_replace(expr, cfg.group_label, "$1", label, "(.+)")
    return expr


def native_selector(metric: str, *matchers: str) -> str:
    """A selector of SGLang's own metric ``sglang:<name>`` in both spellings it reaches Prometheus in:
    ``sglang:<name>`` (the classic text format, or Prometheus 3 negotiating UTF-8) and
    ``sglang_<name>`` (prometheus_client 0.23+ writes the samples so under OpenMetrics with
    Prometheus 2's default escaping; SGLang's router /engine_metrics and its Ray wrapper rename so
    too). Anchored, so never one of our own sglang_scheduler_* names."""
    prefix, name = metric.split(":", 1)
    return selector("", f'__name__=~"{prefix}[:_]{name}"', *matchers)


def per_group(cfg: Config, fn: Callable[[str], str], metric: str, matchers: str = "",
              split: tuple[str, ...] = (), *, native: bool = False, server: bool = False) -> str:
    """The pods of one group merged with max, per scheduler (and per ``split`` label value).

    ``fn`` turns a selector into the per-pod expression (``lambda s: f"rate({s}[5m])"``, or identity
    for a gauge); ``matchers`` narrows the metric (``'phase="decode"'``). ``native``: a series of
    SGLang's own /metrics (``metric`` as SGLang names it, ``sglang:<name>``; read in both spellings,
    :func:`native_selector`), given the scheduler labels it lacks; its replicas of one scheduler (one
    series per tp_rank, pp_rank, moe_ep_rank, and model_name, engine_type, priority, extra labels)
    fall away in the max. ``server``: per server (``server_by``), not per scheduler."""
    g = cfg.group_label
    labels = ", ".join((*(cfg.server_by if server else cfg.group_by), *split))

    def read(group_matcher: str) -> str:
        expr = fn((native_selector if native else selector)(metric, matchers, group_matcher))
        return _scheduler_defaults(cfg, expr) if native and not server else expr

    default = _group_default(cfg, read(f'{g}=""'))
    given = read(f'{g}!=""')
    return f"max by ({labels}) (\n    {default}\n  or\n    {given}\n)"


def source(metric: str, name: str, *matchers: str) -> str:
    """A recorded series of one source: ``metric{source="log"[, matchers]}``."""
    return selector(metric, f'source="{name}"', *matchers)


def prefer(cfg: Config, figure: str, series: dict[str, str]) -> str:
    """One series per scheduler from the sources of ``series`` (``{source: expression}``), the most
    exact first (``cfg.precedence[figure]``): ``a or on (<scheduler>) b or on (<scheduler>) c``. The
    result keeps the chosen series' labels (``source`` among them)."""
    order = [s for s in cfg.sources(figure) if s in series]
    missing = set(series) - set(order)
    if missing:
        raise ValueError(f"{figure}: no precedence for sources {sorted(missing)}")
    return f"\nor on ({by(cfg)})\n".join(series[s] for s in order)


def prefer_condition(cfg: Config, figure: str, conditions: dict[str, str], present: dict[str, str]) -> str:
    """An alert condition evaluated on one source per scheduler: the condition of the most exact
    source that is ``present`` there (a source present but not firing silences the others)."""
    order = [s for s in cfg.sources(figure) if s in conditions]
    parts, above = [], []
    for s in order:
        cond = conditions[s]
        for higher in above:
            cond = f"(\n{indent(cond)}\n)\nunless on ({by(cfg)})\n{present[higher]}"
        parts.append(f"(\n{indent(cond)}\n)")
        above.append(s)
    return "\nor\n".join(parts)


def summed(cfg: Config, inner: str) -> str:
    """``sum by (<scheduler>) (inner)``: adds the split values (phase, method) of ``per_group``."""
    return f"sum by ({by(cfg)}) (\n{indent(inner)}\n)"


def divide(cfg: Config, numerator: str, denominator: str, *, on: bool = True) -> str:
    """``numerator / on (<scheduler>) (denominator > 0)``: a ratio that is absent, never infinite,
    where the denominator is 0."""
    match = f" on ({by(cfg)})" if on else ""
    if "\n" in denominator:
        return f"{numerator}\n/{match}\n(\n{indent(denominator)}\n  > 0\n)"
    return f"{numerator}\n/{match}\n({denominator} > 0)"


def num(value: float) -> str:
    """A threshold as PromQL and people write it: 0.05, 3, 300."""
    return f"{value:g}"


def percent(ratio: float) -> str:
    """0.05 -> '5%', 0.955 -> '95.5%'."""
    return f"{round(ratio * 100, 6):g}%"


_UNITS = {"s": ("second", "seconds"), "m": ("minute", "minutes"), "h": ("hour", "hours"), "d": ("day", "days")}


def words(duration: str) -> str:
    """A Prometheus duration in words: '15m' -> '15 minutes', '1h' -> '1 hour'."""
    count, unit = int(duration[:-1]), duration[-1]
    one, many = _UNITS[unit]
    return f"{count} {one if count == 1 else many}"


def the_last(duration: str) -> str:
    """'1h' -> 'the last hour', '30m' -> 'the last 30 minutes'."""
    count, unit = int(duration[:-1]), duration[-1]
    return f"the last {_UNITS[unit][0]}" if count == 1 else f"the last {words(duration)}"


def short_seconds(seconds: float) -> str:
    """Seconds as Prometheus writes a duration: 300 -> '5m', 10 -> '10s'."""
    s = int(seconds)
    if s == seconds and s % 3600 == 0:
        return f"{s // 3600}h"
    if s == seconds and s % 60 == 0:
        return f"{s // 60}m"
    return f"{num(seconds)}s"


def scheduler_ref(cfg: Config) -> str:
    """How an alert description names the scheduler: ``dp_rank={{ $labels.dp_rank }}``, after
    ``stage=...`` where the scheduler has a stage (SGLang Omni; plain SGLang's is empty and not shown)."""
    last = cfg.scheduler_labels[-1]
    return "".join(f"{{{{ with $labels.{label} }}}}{label}={{{{ . }}}} {{{{ end }}}}"
                   for label in cfg.scheduler_labels[:-1]) + f"{last}={{{{ $labels.{last} }}}}"


def priority_class(cfg: Config, expr: str, *, empty_is_unset: bool = False) -> str:
    """``expr`` (series with SGLang's raw ``priority`` label) given ``priority_class``: the last entry
    of ``cfg.priority_classes`` whose regex matches the whole value, else ``priority_other`` (any
    non-empty value). The empty value: on the scheduler's gauges SGLang's total (select
    ``priority!=""`` first); on the tokenizer's request histograms a request sent without a priority
    (``empty_is_unset``: class ``priority_unset``)."""
    dst = cfg.priority_class_label
    expr = _label_replace(expr, dst, cfg.priority_other, "priority", ".+")
    if empty_is_unset:
        expr = _label_replace(expr, dst, cfg.priority_unset, "priority", "")
    for name, regex in cfg.priority_classes:
        expr = _label_replace(expr, dst, name, "priority", regex)
    return expr


def by_ranks(cfg: Config) -> str:
    """``namespace, sglang_group, stage``: one set of DP ranks (``Config.ranks_by``)."""
    return ", ".join(cfg.ranks_by)
