"""Our conventions on top of Grafana's foundation SDK (``grafana-foundation-sdk``, Grafana 11.6 schema).

The SDK builds and serialises the dashboard model; this module only fixes what every panel of ours
has: the ``${datasource}`` variable on the panel and each target, a unit, a description, refIds A, B, ...
in order, thresholds as ``(value, colour)`` pairs, and ids numbered in panel order (the SDK leaves
panel ids unset). Layout: the SDK places panels left to right and starts a new line at 24 columns;
give the panels of a line widths that add up to 24 (tests/test_dashboards.py checks that no two
panels overlap).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from grafana_foundation_sdk.builders import common as common_b
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import heatmap as heatmap_b
from grafana_foundation_sdk.builders import prometheus, stat, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as common_m
from grafana_foundation_sdk.models import dashboard as dash_m
from grafana_foundation_sdk.models import heatmap as heatmap_m
from grafana_foundation_sdk.models import prometheus as prometheus_m

from ..config import Config
from ..promql import WHOLE_HISTOGRAMS

DS = dash_m.DataSourceRef(type_val="prometheus", uid="${datasource}")
UIDS = {"oncall": "sglang-oncall", "scheduler": "sglang-scheduler", "gpu": "sglang-gpu", "capacity": "sglang-capacity"}
TITLES = {"oncall": "On call", "scheduler": "Scheduler", "gpu": "GPU", "capacity": "Capacity"}
#: Target: (PromQL, legend).
Target = tuple[str, str]


def scheduler_names(cfg: Config) -> str:
    """Legend text of a scheduler: ``dp{{dp_rank}}`` (``{{stage}} dp{{dp_rank}}`` with stages)."""
    return " ".join("dp{{dp_rank}}" if label == "dp_rank" else f"{{{{{label}}}}}" for label in cfg.scheduler_labels)


def recorded(cfg: Config, rule: str, *matchers: str, legend: str = "") -> Target:
    """A recording rule's series (one per group, scheduler and source: no pod filter), legend
    ``group dpN`` (with the source where the rule has several)."""
    m = Merged.build(cfg)
    return m.of(rule, *matchers), legend or m.legend


@dataclass(frozen=True)
class Merged:
    """The normalised recorded series of every source (log, fpm, SGLang's own /metrics), filtered by
    the dashboard's namespace, server (``sglang_group``) and scheduler variables.

    ``on`` joins two of them per scheduler; ``prefer`` takes one per scheduler in the config's order
    of sources, as the alerts do; ``legend`` names a scheduler and ``sourced`` adds the source."""

    sel: str
    on: str
    legend: str
    cfg: Config

    @classmethod
    def build(cls, cfg: Config) -> Merged:
        labels = ("namespace", cfg.group_label, *cfg.scheduler_labels)
        sel = ", ".join(f'{label}=~"${label}"' for label in labels)
        return cls(sel, f"on ({', '.join(cfg.group_by)})", f"{{{{{cfg.group_label}}}}} {scheduler_names(cfg)}", cfg)

    @property
    def sourced(self) -> str:
        return f"{self.legend} ({{{{source}}}})"

    def of(self, rule: str, *matchers: str) -> str:
        inner = ", ".join((self.sel, *(m for m in matchers if m)))
        return f"{rule}{{{inner}}}"

    def source(self, rule: str, source: str, *matchers: str) -> str:
        return self.of(rule, f'source="{source}"', *matchers)

    def prefer(self, figure: str, rules: dict[str, str], *matchers: str) -> str:
        """``{source: rule}`` -> the first present per scheduler, in ``Config.precedence`` order."""
        order = [s for s in self.cfg.sources(figure) if s in rules]
        return f" or {self.on} ".join(self.source(rules[s], s, *matchers) for s in order)


def row(title: str) -> dash.Row:
    """A row header (expanded)."""
    return dash.Row(title)


@dataclass(frozen=True)
class Scope:
    """The selector, grouping and legend of one dashboard's series.

    ``sel`` filters by the dashboard variables (``namespace=~"$namespace", pod=~"$pod", dp_rank=~"$dp_rank"``),
    ``by`` groups per pod and scheduler, ``legend`` names a series (``{{pod}} dp{{dp_rank}}``)."""

    sel: str
    by: str
    legend: str

    @classmethod
    def scheduler(cls, cfg: Config) -> Scope:
        labels = ("namespace", "pod", *cfg.scheduler_labels)
        return cls(", ".join(f'{label}=~"${label}"' for label in labels), ", ".join(labels),
                   f"{{{{pod}}}} {scheduler_names(cfg)}")

    @classmethod
    def gpu(cls) -> Scope:
        return cls('namespace=~"$namespace", pod=~"$pod", gpu=~"$gpu"', "namespace, pod, gpu", "{{pod}} gpu{{gpu}}")

    def of(self, metric: str, extra: str = "") -> str:
        """``metric{<sel>[, extra]}``."""
        return f"{metric}{{{self.sel}, {extra}}}" if extra else f"{metric}{{{self.sel}}}"

    def rate(self, metric: str, extra: str = "", by: str | None = None) -> str:
        """Per-second rate summed per pod and scheduler (``$__rate_interval``)."""
        return f"sum by ({by or self.by}) (rate({self.of(metric, extra)}[$__rate_interval]))"

    def quantile(self, q: float, metric: str, extra: str = "") -> str:
        """``histogram_quantile`` of a histogram, per pod and scheduler; of a histogram of whole numbers
        (requests per batch: ``monitoring.promql.WHOLE_HISTOGRAMS``) rounded up, since the linear
        interpolation within a bucket ``(n-1, n]`` gives a value below every observation in it."""
        expr = (f"histogram_quantile({q:g}, sum by ({self.by}, le) "
                f"(rate({self.of(metric + '_bucket', extra)}[$__rate_interval])))")
        return f"ceil({expr})" if metric in WHOLE_HISTOGRAMS else expr

    def latest(self, metric: str) -> str:
        """A start-up gauge (one value per scheduler even when several ranks print it)."""
        return f"max by ({self.by}) ({self.of(metric)})"


def _targets(panel, targets: list[Target], *, instant: bool = False, fmt: prometheus_m.PromQueryFormat | None = None):
    for ref, (expr, legend) in zip("ABCDEFGH", targets, strict=False):
        q = prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref).datasource(DS)
        if instant:
            q = q.instant()
        if fmt is not None:
            q = q.format(fmt)
        panel = panel.with_target(q)
    return panel


def _thresholds(steps: list[tuple[float, str]], base: str) -> dash.ThresholdsConfig:
    return dash.ThresholdsConfig().mode(dash_m.ThresholdsMode.ABSOLUTE).steps(
        [dash_m.Threshold(color=base, value=None), *(dash_m.Threshold(color=c, value=v) for v, c in steps)])


def _common(panel, title: str, description: str, unit: str, w: int, h: int, lo: float | None, hi: float | None):
    panel = panel.title(title).description(description).datasource(DS).unit(unit).span(w).height(h)
    if lo is not None:
        panel = panel.min(lo)
    if hi is not None:
        panel = panel.max(hi)
    return panel


def graph(title: str, description: str, unit: str, targets: list[Target], *, w: int = 12, h: int = 8,
          lo: float | None = None, hi: float | None = None, thresholds: list[tuple[float, str]] = ()):
    """A time series panel; one threshold is drawn as line and area, several as lines."""
    panel = _targets(_common(timeseries.Panel(), title, description, unit, w, h, lo, hi), targets)
    if thresholds:
        mode = common_m.GraphThresholdsStyleMode.LINE_AND_AREA if len(thresholds) == 1 else common_m.GraphThresholdsStyleMode.LINE
        panel = panel.thresholds(_thresholds(thresholds, "green")).thresholds_style(
            common_b.GraphThresholdsStyleConfig().mode(mode))
    return panel


def single(title: str, description: str, unit: str, targets: list[Target], *, w: int = 6, h: int = 4,
           lo: float | None = None, hi: float | None = None, thresholds: list[tuple[float, str]] = (),
           base: str = "green", background: bool = False):
    """A stat panel: the latest value of each series, coloured by its thresholds, with a sparkline."""
    panel = _targets(_common(stat.Panel(), title, description, unit, w, h, lo, hi), targets)
    panel = panel.reduce_options(common_b.ReduceDataOptions().calcs(["lastNotNull"]).values(False)).graph_mode(
        common_m.BigValueGraphMode.AREA)
    if background:
        panel = panel.color_mode(common_m.BigValueColorMode.BACKGROUND)
    if thresholds or base != "green":
        panel = panel.thresholds(_thresholds(list(thresholds), base))
    return panel


def heat(title: str, description: str, unit: str, target: Target, scheme: str, *, w: int = 12, h: int = 8):
    """A heatmap of histogram buckets already counted per interval (no calculation by Grafana)."""
    panel = _targets(_common(heatmap_b.Panel(), title, description, unit, w, h, None, None), [target],
                     fmt=prometheus_m.PromQueryFormat.HEATMAP)
    return (panel.calculate(False).cell_gap(1).y_axis(heatmap_b.YAxisConfig().unit(unit))
            .color(heatmap_b.HeatmapColorOptions().mode(heatmap_m.HeatmapColorMode.SCHEME).scheme(scheme)))


def grid(title: str, description: str, target: Target, *, w: int = 12, h: int = 8):
    """A table of the labels of an info metric (instant query)."""
    return _targets(_common(table.Panel(), title, description, "none", w, h, None, None), [target],
                    instant=True, fmt=prometheus_m.PromQueryFormat.TABLE)


def _query_variable(name: str, label: str, q: str) -> dash.QueryVariable:
    return (dash.QueryVariable(name).label(label).datasource(DS).query(q)
            .refresh(dash_m.VariableRefresh.ON_TIME_RANGE_CHANGED).include_all(True).all_value(".*").multi(True)
            .sort(dash_m.VariableSort.ALPHABETICAL_ASC)
            .current(dash_m.VariableOption(selected=True, text=["All"], value=["$__all"])))


def variables(cfg: Config, kind: str) -> list:
    """Data source, namespace, then per kind: the GPU dashboard pod and gpu; the scheduler dashboards
    server (``sglang_group``, from the recorded series of every source), pod (the sidecar's raw
    panels), the scheduler labels and the source; the capacity dashboard also the safety factor."""
    pods = 'namespace=~"$namespace"'
    if kind == "gpu":
        return [dash.DatasourceVariable("datasource").label("Data source").type("prometheus"),
                _query_variable("namespace", "Namespace", "label_values(sglang_exporter_build_info, namespace)"),
                _query_variable("pod", "Pod", f"label_values(sglang_exporter_build_info{{{pods}}}, pod)"),
                _query_variable("gpu", "GPU", f'label_values(sglang_gpu_info{{{pods}, pod=~"$pod"}}, gpu)')]
    recorded_any = f'{{__name__=~"{cfg.level}:.+"'
    g = cfg.group_label
    out = [dash.DatasourceVariable("datasource").label("Data source").type("prometheus"),
           _query_variable("namespace", "Namespace", f"label_values({recorded_any}}}, namespace)"),
           _query_variable(g, "Server", f"label_values({recorded_any}, {pods}}}, {g})")
           .description(f"The SGLang server: its pod, or the {g} label of a multi-node group. Filters the "
                        "panels that read the recorded series of every source."),
           _query_variable("pod", "Pod (sidecar)", f"label_values(sglang_exporter_build_info{{{pods}}}, pod)")
           .description("Filters the panels that read the sidecar's own series (sglang_scheduler_*).")]
    for label in cfg.scheduler_labels:
        out.append(_query_variable(label, "DP rank (scheduler)" if label == "dp_rank" else f"{label} (scheduler)",
                                   f'label_values({recorded_any}, {pods}, {g}=~"${g}"}}, {label})'))
    if kind == "scheduler":
        out.append(_query_variable("source", "Source", f'label_values({recorded_any}, {pods}, {g}=~"${g}"}}, source)')
                   .description("log: the sidecar reading the scheduler log; fpm: the sidecar following SGLang's "
                                "per-forward-pass stream; sglang_metrics: SGLang's own /metrics. Filters the "
                                "panels that compare sources."))
    if kind == "capacity":
        chosen = f"{cfg.safety_factor:g}"
        out.append(dash.CustomVariable("safety_factor").label("Safety factor")
                   .values(",".join(f"{v:g}" for v in cfg.safety_factor_choices))
                   .current(dash_m.VariableOption(selected=True, text=chosen, value=chosen))
                   .description("Share of the estimated KV capacity to use as the running-request ceiling "
                                "(method.md: 60-70% for offline work; fragmentation and length variance)."))
    return out


def dashboard(cfg: Config, kind: str, title: str, description: str) -> dash.Dashboard:
    """An empty dashboard of ours: uid, tags, variables, links to the other two, 30 s refresh, last 3 h."""
    uid = UIDS[kind]
    board = (dash.Dashboard(title).uid(uid).description(description).tags(["sglang", "sglang-exporter"])
             .editable().tooltip(dash_m.DashboardCursorSync.CROSSHAIR).version(1).refresh("30s")
             .time("now-3h", "now").timezone(""))
    for variable in variables(cfg, kind):
        board = board.with_variable(variable)
    for other, other_uid in UIDS.items():
        if other != kind:
            board = board.link(dash.DashboardLink(TITLES[other]).type(dash_m.DashboardLinkType.LINK)
                               .url(f"/d/{other_uid}").target_blank(False))
    return board


def collapse_rows(model: dict, open_rows: int) -> dict:
    """Collapse every row after the first ``open_rows``: its panels move into the row (Grafana's
    collapsed form), the collapsed rows stack one grid unit apart, and each panel keeps its place
    within its row for when the row is opened."""
    out: list[dict] = []
    rows = 0
    row: dict | None = None
    y = 0  # where the next collapsed row goes
    for panel in model["panels"]:
        if panel["type"] == "row":
            rows += 1
            if rows > open_rows:
                old_y = panel["gridPos"]["y"]
                y = y if row is not None else old_y
                row = dict(panel, collapsed=True, panels=[], gridPos=dict(panel["gridPos"], y=y))
                row["_from"] = old_y
                out.append(row)
                y += 1
                continue
        if row is None:
            out.append(panel)
        else:
            g = panel["gridPos"]
            row["panels"].append(dict(panel, gridPos=dict(g, y=row["gridPos"]["y"] + g["y"] - row["_from"])))
    for panel in out:
        panel.pop("_from", None)
    return dict(model, panels=out)


def to_json(board: dash.Dashboard, open_rows: int | None = None) -> str:
    """The dashboard as committed: panels numbered 1.. in order, keys sorted, two-space indent; with
    ``open_rows``, the rows after the first ``open_rows`` collapsed (:func:`collapse_rows`)."""
    model = board.build()
    for i, panel in enumerate(model.panels or [], start=1):
        panel.id_val = i
    data = json.loads(json.dumps(model, cls=JSONEncoder))
    if open_rows is not None:
        data = collapse_rows(data, open_rows)
    return json.dumps(data, indent=2, sort_keys=True) + "\n"
