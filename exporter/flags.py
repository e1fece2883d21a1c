"""The command line of ``sglang-exporter``: pydantic-settings' command-line source on a root parser of ours.

pydantic-settings names the flags from the settings models: each field of a group model
(``LogSettings`` as the ``log`` field of ``Settings``) is ``--log.<name-in-kebab-case>``, a top-level
field (``one_shot``) ``--one-shot``; it parses them into the values the model checks
(:func:`command_line_source`). This module gives it the help, the placeholders and the errors. The
placeholder is the field's ``json_schema_extra["metavar"]`` (``PATH``, ``SECONDS``, ...), the choices
of a ``Literal``, or ``[=BOOL]``. The same definitions give ``--help`` and the settings table of
``docs/configuration.md`` (:func:`settings_table`), so the three cannot drift apart.

Every boolean flag takes the same spellings: ``--demo`` (true), ``--demo false``, ``--demo=no``,
``--no-demo``; the words are pydantic's (true/false, yes/no, on/off, 1/0, t/f, y/n, any case), so a
flag, its environment variable and a TOML string read alike. Argument errors are raised as one-line
:class:`UsageError` messages naming the flag; nothing here prints a usage dump.
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
import shlex
import shutil
import textwrap
import typing
from dataclasses import dataclass
from typing import Any

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, CliSettingsSource, NoDecode

from . import __version__
from .commands import usage_lines
from .suggest import closest, normalized  # noqa: F401  (imported from here by older callers)
from .status import ExitStatus

PROG = "sglang-exporter"
#: The strings pydantic takes as booleans (lower case); a flag takes the same.
BOOL_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "1", "0", "t", "f", "y", "n"})

USAGE = "\n       ".join([f"{PROG} --log.path PATH [OPTIONS]", f"{PROG} --one-shot --log.path PATH [OPTIONS]",
                            f"{PROG} --demo [OPTIONS]", *usage_lines()])

EXAMPLES = f"""\
examples:
  {PROG} --log.path /logs/sglang.log
      Follow the log SGLang is writing; serve its metrics on :18400/metrics.
  {PROG} --one-shot --log.path server.log > server.prom
      Read a recorded log once, print every metric and exit.
  {PROG} report server.log
      Report on a recorded log: batch size, retractions, KV cache, queue wait.
  {PROG} --demo
      Replay the bundled sample log and serve it: no GPU or SGLang needed.
"""

TOP_TITLE = "what to run (by default: serve live metrics of --log.path)"


class UsageError(Exception):
    """An argument the command line cannot take. ``str()`` is one line naming the flag or argument."""


@dataclass(frozen=True)
class Setting:
    """One setting as the command line, the environment and the docs show it.

    Attributes:
        group: The group field (``"log"``), or None for a top-level setting (``one_shot``).
        name: The field name in snake case (``"poll_interval"``).
        field: The pydantic field (description, default, constraints, ``metavar``).
        env_prefix: ``SGLANG_EXPORTER_``.
        group_title: The heading of its group in ``--help``.
    """

    group: str | None
    name: str
    field: FieldInfo
    env_prefix: str
    group_title: str

    @property
    def dest(self) -> str:
        """``log.poll_interval``: the dotted name errors use."""
        return f"{self.group}.{self.name}" if self.group else self.name

    @property
    def flag(self) -> str:
        """``--log.poll-interval``."""
        return "--" + self.dest.replace("_", "-")

    @property
    def aliases(self) -> tuple[str, ...]:
        """Other spellings of the flag (``json_schema_extra={"aliases": (...)}``): the exporter-toolkit's
        ``--web.config.file``, which every Prometheus exporter takes, for ``--web.config-file``."""
        extra = self.field.json_schema_extra
        return tuple(extra.get("aliases", ())) if isinstance(extra, dict) else ()

    @property
    def env(self) -> str:
        """``SGLANG_EXPORTER_LOG__POLL_INTERVAL``."""
        return self.env_prefix + (f"{self.group}__{self.name}" if self.group else self.name).upper()

    @property
    def is_bool(self) -> bool:
        return self.field.annotation is bool

    @property
    def metavar(self) -> str:
        """The placeholder of the value: ``PATH``, ``SECONDS``, ``{inotify,poll}``, ``[=BOOL]``."""
        if self.is_bool:
            return "[=BOOL]"
        if typing.get_origin(self.field.annotation) is typing.Literal:
            return "{" + ",".join(map(str, typing.get_args(self.field.annotation))) + "}"
        extra = self.field.json_schema_extra
        if isinstance(extra, dict) and isinstance(extra.get("metavar"), str):
            return extra["metavar"]
        raise TypeError(f"setting {self.dest} has no metavar (json_schema_extra={{'metavar': ...}})")

    @property
    def repeatable(self) -> bool:
        """True for a comma-list setting (annotated ``NoDecode``): repeating its flag adds to the list
        (``--log.path a --log.path b`` is ``--log.path a,b``; pydantic-settings joins the values)."""
        return NoDecode in self.field.metadata

    @property
    def synopsis(self) -> str:
        """How the flag is written: ``--log.poll-interval SECONDS``, ``--demo[=BOOL]``."""
        return self.flag + self.metavar if self.is_bool else f"{self.flag} {self.metavar}"

    @property
    def default(self) -> str:
        """The default as a user writes it: ``1.0``, ``false``, ``:18400``; ``none`` for None."""
        value = self.field.default
        if value is None:
            return "none"
        return str(value).lower() if isinstance(value, bool) else str(value)

    @property
    def bounds(self) -> str:
        """The numeric range from the field's constraints: ``above 0, at most 60``; empty without."""
        words = {Gt: ("above", "gt"), Ge: ("at least", "ge"), Lt: ("below", "lt"), Le: ("at most", "le")}
        parts = []
        for meta in self.field.metadata:
            for kind, (word, attr) in words.items():
                if isinstance(meta, kind):
                    parts.append(f"{word} {getattr(meta, attr):,}")
        return ", ".join(parts)

    def help(self) -> str:
        """The description, the range, the default and the environment variable, as ``--help`` shows."""
        text = self.field.description or ""
        if self.bounds:
            text += f" Range: {self.bounds}."
        if self.field.default is not None:
            text += f" Default: {self.default}."
        return f"{text} Env: {self.env}."


def settings_of(model: type[BaseModel], env_prefix: str) -> list[Setting]:
    """The settings of ``model``: each field of each group model, then the top-level fields.

    A field whose annotation is a pydantic model is a group, titled by the first paragraph of the
    model's docstring; the others are top-level settings.
    """
    groups, top = [], []
    for name, field in model.model_fields.items():
        sub = field.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            first_paragraph = inspect.cleandoc(sub.__doc__ or name).split("\n\n")[0]
            title = " ".join(first_paragraph.split()).replace("``", "").rstrip(".")
            groups += [Setting(name, n, f, env_prefix, title) for n, f in sub.model_fields.items()]
        else:
            top.append(Setting(None, name, field, env_prefix, TOP_TITLE))
    return top + groups


def _exit_statuses() -> list[tuple[int, str]]:
    """``(code, meaning)`` of each :class:`ExitStatus` member, from the ``Attributes:`` of its docstring."""
    doc = inspect.cleandoc(ExitStatus.__doc__ or "")
    meanings: dict[str, str] = {}
    name = None
    for line in doc.partition("Attributes:")[2].splitlines():
        m = re.match(r"\s*([A-Z][A-Z0-9_]*): (.*)", line)
        if m and m.group(1) in ExitStatus.__members__:
            name = m.group(1)
            meanings[name] = m.group(2).strip()
        elif name and line.strip():
            meanings[name] += " " + line.strip()
        else:
            name = None
    return [(int(member), meanings.get(member.name, member.name.replace("_", " ").lower()))
            for member in ExitStatus]


def help_width() -> int:
    """Width of the text ``--help`` wraps itself (argparse's: the terminal's, less 2), 40 to 100."""
    return max(40, min(shutil.get_terminal_size().columns - 2, 100))


def exit_status_help(width: int | None = None) -> str:
    """The ``exit status:`` section of ``--help``, one entry per :class:`ExitStatus` member, wrapped
    to ``width`` (default: the terminal's, as argparse wraps the rest)."""
    width = width or help_width()
    return "exit status:\n" + "".join(
        textwrap.fill(text.replace("``", ""), width, initial_indent=f"  {code}  ",
                      subsequent_indent=" " * (len(str(code)) + 4), break_on_hyphens=False) + "\n"
        for code, text in _exit_statuses())


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Shows a boolean flag as ``--demo[=BOOL], --no-demo`` and the others as ``--flag METAVAR``."""

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if action.type is _bool_word and action.option_strings:
            flag = action.option_strings[0]
            return f"{flag}[=BOOL], --no-{flag[2:]}"
        return super()._format_action_invocation(action)

    def _split_lines(self, text: str, width: int) -> list[str]:
        # Never break inside a flag or a variable name ('--gpu.enabled', 'SGLANG_EXPORTER_LOG__PATH').
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def _bool_word(text: str) -> str:
    if text.lower() not in BOOL_WORDS:
        raise argparse.ArgumentTypeError(f"expected true or false (or yes/no, on/off, 1/0), got {text[:80]!r}")
    return text


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, raised; the command prints it and exits 2
        message = re.sub(r"^argument (\S+): expected one argument$", r"\1 needs a value", message)
        raise UsageError(re.sub(r"^argument (\S+): ", r"\1: ", message))


def command_line_source(settings_cls: type[BaseSettings], settings: list[Setting],
                        description: str) -> CliSettingsSource:
    """pydantic-settings' command-line source of ``settings_cls`` on a root parser of ours.

    pydantic-settings walks the models and names each flag (``--log.poll-interval``, the dotted
    kebab-case of the field; ``--web.config.file`` from :attr:`Setting.aliases`); the root parser adds
    ``--help`` (text, placeholders, exit statuses), ``--version`` and one-line errors. Every option
    defaults to "not given", so that the source holds only what the command line set and the
    environment and the file fill the rest. Call the source with ``args=[...]``; ``--help`` and
    ``--version`` print and exit 0 (:class:`SystemExit`).

    Raises (when called with ``args``):
        UsageError: an unknown flag, a flag without its value, a positional argument, a boolean flag
            with a word that is not a boolean. One line naming the flag or argument.
    """
    description = textwrap.fill(" ".join(description.split()), help_width(), break_on_hyphens=False)
    parser = _Parser(prog=PROG, usage=USAGE, description=description,
                     epilog=EXAMPLES + "\n" + exit_status_help(), formatter_class=_HelpFormatter,
                     allow_abbrev=False, add_help=False, argument_default=argparse.SUPPRESS)
    general = parser.add_argument_group("general")
    general.add_argument("-h", "--help", action="help", help="Show this help and exit.")
    general.add_argument("--version", action="version", version=f"{PROG} {__version__}",
                         help="Print the version and exit.")
    by_dest = {s.dest: s for s in settings}
    groups = {s.group_title: parser.add_argument_group(s.group_title) for s in settings}  # in --help's order

    def add_argument(_context: Any, *names: str, **kwargs: Any) -> Any:
        s = by_dest.get(kwargs["dest"])
        if s is None:  # a whole group as JSON (--log '{...}'): not offered, a group is set key by key
            return None
        kwargs.update(help=s.help(), metavar="BOOL" if s.is_bool else s.metavar)
        if s.is_bool:
            kwargs["type"] = _bool_word
        elif s.repeatable:
            kwargs["action"] = "append"
        return groups[s.group_title].add_argument(*names, **kwargs)

    def parse(root: argparse.ArgumentParser, args: list[str]) -> argparse.Namespace:
        args = _spell_out_bools(list(args), settings)
        namespace, leftover = root.parse_known_args(args)
        leftover = [a for a in leftover if a != "--"]  # argparse may leave the end-of-options marker
        if leftover:
            raise _stray(leftover, root, settings)
        return namespace

    return CliSettingsSource(
        settings_cls, root_parser=parser, parse_args_method=parse, add_argument_method=add_argument,
        add_argument_group_method=lambda root, **_: root, cli_kebab_case=True, cli_avoid_json=True,
        cli_exit_on_error=False, cli_parse_none_str="\0",  # no argument can hold NUL: "None" stays a path
        cli_shortcuts={s.flag[2:]: [a[2:] for a in s.aliases] for s in settings if s.aliases})


def _looks_like_a_path(text: str) -> bool:
    return "/" in text or "." in text or os.path.exists(text)


def _spell_out_bools(args: list[str], settings: list[Setting]) -> list[str]:
    """Rewrite every boolean flag as ``--flag=WORD``: ``--demo`` -> ``--demo=true``, ``--demo no`` ->
    ``--demo=no``, ``--no-demo`` -> ``--demo=false``. A word after a bare flag is its value only when
    it is a boolean word, so ``--one-shot server.log`` stays a flag and a stray path.

    Raises:
        UsageError: a bare boolean flag is followed by a word that is neither a boolean nor a path
            (``--gpu.enabled maybe``).
    """
    flags = {s.flag for s in settings if s.is_bool}
    out: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return out + args[i:]
        nxt = args[i + 1] if i + 1 < len(args) else None
        if a in flags:
            if nxt is not None and nxt.lower() in BOOL_WORDS:
                out.append(f"{a}={nxt}")
                i += 2
                continue
            if nxt is not None and not nxt.startswith("-") and not _looks_like_a_path(nxt):
                raise UsageError(f"{a}: expected true or false (or yes/no, on/off, 1/0), got {nxt[:80]!r}")
            out.append(f"{a}=true")
        elif a.startswith("--no-") and "--" + a[5:] in flags:
            out.append(f"--{a[5:]}=false")
        else:
            out.append(a)
        i += 1
    return out


def _stray(leftover: list[str], parser: argparse.ArgumentParser, settings: list[Setting]) -> UsageError:
    """The error for what argparse did not take: an unknown flag (with the closest known one), or
    positional arguments (a log path given without ``--log.path``)."""
    known = [o for a in parser._actions for o in a.option_strings]
    known += ["--no-" + s.flag[2:] for s in settings if s.is_bool]
    name = leftover[0].split("=", 1)[0]
    if name.startswith("-") and name != "-" and name not in known:  # a known one came after '--'
        guess = closest(name, known)
        hint = f"; did you mean {guess}?" if guess else ""
        return UsageError(f"unknown flag {name}{hint}")
    paths = [a for a in leftover if a == "-" or a.split("=", 1)[0] in known or not a.startswith("-")]
    shown = " ".join(shlex.quote(p) for p in paths)
    noun = "argument" if len(paths) == 1 else "arguments"
    return UsageError(f"unexpected {noun} {shown}: did you mean --log.path {shlex.quote(','.join(paths))}, "
                      f"or {PROG} report {shown}?")


def settings_table(settings: list[Setting]) -> str:
    """The Markdown table of ``docs/configuration.md``: flag, environment variable, default, meaning."""
    rows = ["| flag | environment | default | meaning |", "|---|---|---|---|"]
    for s in settings:
        meaning = (s.field.description or "") + (f" Range: {s.bounds}." if s.bounds else "")
        rows.append(f"| `{s.synopsis}` | `{s.env}` | `{s.default}` | {meaning.replace('|', '&#124;')} |")
    return "\n".join(rows) + "\n"
