"""Prometheus rule files as data: recording rules, alerts, groups, and their YAML text.

PyYAML writes every value (quoting is its job); this module only adds what YAML dumpers cannot:
a header and a comment line above each rule, so that the committed file still reads like the
hand-written one it replaced.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from .config import Alerting, Config


@dataclass(frozen=True)
class Recording:
    """One recording rule. ``expr`` is PromQL (multi-line allowed); ``comment`` says what it records."""

    record: str
    expr: str
    comment: str
    labels: dict[str, str] = field(default_factory=dict)

    def as_dict(self, cfg: Config) -> dict:
        out: dict = {"record": self.record, "expr": self.expr.strip() + "\n"}
        if self.labels:
            out["labels"] = dict(self.labels)
        return out


@dataclass(frozen=True)
class Alert:
    """One alerting rule. Durations come from the config's :class:`Alerting` of the same name, the
    ``runbook_url`` from the config's runbook base.

    ``summary`` is static (Alertmanager groups by it); ``description`` is a Go template that names
    the series (``{{ $labels.x }}``) and the value (``{{ $value }}``)."""

    alert: str
    expr: str
    severity: str
    summary: str
    description: str
    comment: str = ""

    def as_dict(self, cfg: Config) -> dict:
        tuning: Alerting = cfg.alerts[self.alert]
        out: dict = {"alert": self.alert, "expr": self.expr.strip() + "\n"}
        if tuning.for_:
            out["for"] = tuning.for_
        if tuning.keep_firing_for:
            out["keep_firing_for"] = tuning.keep_firing_for
        out["labels"] = {"severity": self.severity}
        out["annotations"] = {"summary": self.summary, "description": " ".join(self.description.split()),
                              "runbook_url": cfg.runbook_url(self.alert)}
        return out


@dataclass(frozen=True)
class Group:
    """A rule group (evaluated together, in order)."""

    name: str
    rules: list[Recording | Alert]


class _Dumper(yaml.SafeDumper):
    """Block style; PromQL as literal blocks, long annotations folded, keys in the given order."""


def _str(dumper: yaml.SafeDumper, value: str):
    style = "|" if "\n" in value else (">" if len(value) > 80 and " " in value else None)
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def _comment(text: str, prefix: str) -> list[str]:
    return [f"{prefix}#{' ' + line if line else ''}" for line in text.strip("\n").splitlines()]


def render(cfg: Config, header: str, groups: list[Group]) -> str:
    """The text of a rule file: ``header`` as comment lines, then the groups, a comment above each rule."""
    lines = [*_comment(header, ""), "groups:"]
    for group in groups:
        lines += [f"  - name: {group.name}", "    rules:"]
        for i, rule in enumerate(group.rules):
            if isinstance(rule, Alert) and i:
                lines.append("")
            if rule.comment:
                lines += _comment(rule.comment, "      ")
            body = yaml.dump([rule.as_dict(cfg)], Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True)
            lines += ["      " + line if line else line for line in body.splitlines()]
    return "\n".join(lines) + "\n"
