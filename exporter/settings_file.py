"""The config file's checks before validation: unknown tables and keys (with the key meant), and
values of the wrong TOML type (which pydantic's lax conversion would take), and the reading itself
(:func:`read_config_file`). :mod:`exporter.settings` calls them with its model from pydantic-settings'
TOML source."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from .files import read_small_file
from .limits import CONFIG_FILE_MAX_BYTES
from .suggest import closest, normalized


class SettingsError(Exception):
    """A setting has a bad value. ``str()`` names the setting, its flag and its variable."""


def read_config_file(path: Path) -> dict[str, Any]:
    """The TOML file of ``--config.file`` as a dict of tables, read whole up to
    :data:`~exporter.limits.CONFIG_FILE_MAX_BYTES`.

    Raises:
        SettingsError: the file is missing, unreadable, not a small regular file, not UTF-8 or not
            valid TOML; one line naming the setting and the file.
    """
    where = "setting config.file (--config.file, SGLANG_EXPORTER_CONFIG__FILE)"
    try:
        return tomllib.loads(read_small_file(path, CONFIG_FILE_MAX_BYTES).decode("utf-8"))
    except OSError as exc:
        raise SettingsError(f"{where}: cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise SettingsError(f"{where}: {path} is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{where}: {path} is not valid TOML: {exc}") from None
    except ValueError as exc:  # not a regular file, or too large
        raise SettingsError(f"{where}: {path}: {exc}") from None
    except RecursionError:  # arrays or inline tables nested hundreds deep: tomllib recurses
        raise SettingsError(f"{where}: {path} nests arrays or tables too deep to read") from None


def check_file_keys(data: dict[str, Any], path: Path, valid: dict[str | None, list[str]]) -> None:
    """Refuse an unknown table or key of the config file, naming the file, the table and the key and
    suggesting the closest valid one (``poll-interval`` -> ``poll_interval``, ``[logs]`` -> ``[log]``);
    a key of another table is pointed there (``[log] enabled`` -> ``[gpu] enabled``).

    ``valid``: the keys of each table (``None``: the top level, whose keys include the tables).

    Raises:
        SettingsError: one line listing every unknown table and key.
    """
    tables = [t for t in valid if t is not None]
    problems = []

    def elsewhere(key: str, table: str | None) -> str | None:
        for t in tables:
            if t != table and (match := closest(key, valid[t])) and normalized(match) == normalized(key):
                return f"[{t}] {match}"
        return None

    for key, value in data.items():
        if key in valid[None]:
            if key in tables and isinstance(value, dict):
                for sub in value:
                    if sub not in valid[key]:
                        guess = closest(sub, valid[key]) or elsewhere(sub, key)
                        problems.append(f"table [{key}] has no key {sub!r}"
                                        + (f" (did you mean {guess}?)" if guess else ""))
            continue
        if isinstance(value, dict):
            guess = closest(key, tables)
            problems.append(f"there is no table [{key}]" + (f" (did you mean [{guess}]?)" if guess else
                                                            f" (the tables are {', '.join(tables)})"))
        else:
            guess = closest(key, [k for k in valid[None] if k not in tables]) or elsewhere(key, None)
            problems.append(f"the top level has no key {key!r}" + (f" (did you mean {guess}?)" if guess else ""))
    if problems:
        raise SettingsError(f"config file {path}: " + "; ".join(problems)
                            + ". Keys are the setting names in snake case, one table per group")


def _toml_value(value: Any) -> str:
    """How a value reads in TOML, for error messages."""
    if isinstance(value, bool):
        return "true (a boolean)" if value else "false (a boolean)"
    if isinstance(value, str):
        return f"{value[:80]!r} (a string)"
    if isinstance(value, int):
        return f"{value!r} (an integer)"
    if isinstance(value, float):
        return f"{value!r} (a float)"
    return "an array" if isinstance(value, list) else "a table" if isinstance(value, dict) else type(value).__name__


def check_file_types(data: dict[str, Any], path: Path, fields: dict[str, FieldInfo],
                     names: Callable[[tuple[Any, ...]], str]) -> None:
    """Refuse values of the wrong TOML type, as the command line refuses text that does not parse.

    Flags and variables are text and must be converted; a TOML value has a type, and pydantic's
    lax conversion would take ``poll_interval = true`` as 1.0 and ``enabled = "no"`` as false.
    Only type errors are raised here; range and other checks stay with the full validation, which
    sees every source together.

    ``fields``: the settings model's fields (a group's annotation is its model); ``names(loc)``: how
    a message names the setting at ``loc``.

    Raises:
        SettingsError: naming the setting, the file and the key.
    """
    problems = []
    for group, table in data.items():
        field = fields.get(group)
        if field is None:
            continue  # an unknown key: the full validation reports it
        model = field.annotation
        try:
            if isinstance(model, type) and issubclass(model, BaseModel):
                if not isinstance(table, dict):
                    continue  # "should be a table": the full validation reports it
                model.model_validate(table, strict=True)
            else:
                TypeAdapter(model).validate_python(table, strict=True)
        except ValidationError as exc:
            for err in exc.errors():
                if not err["type"].endswith("_type"):
                    continue
                loc = (group, *(p for p in err["loc"] if isinstance(p, str)))
                key = f"[{loc[0]}] {'.'.join(loc[1:])}" if len(loc) > 1 else loc[0]
                expected = err["msg"].removeprefix("Input should be ").removeprefix("a valid ")
                article = "an" if expected[:1] in ("a", "e", "i", "o", "u") else "a"
                problems.append(f"setting {names(loc)}: in {path}, key {key} must be {article} {expected}, "
                                f"got {_toml_value(err['input'])}")
    if problems:
        raise SettingsError("; ".join(problems))
