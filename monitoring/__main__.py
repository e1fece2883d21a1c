"""``python3 -m monitoring``: write the rule files and dashboards from monitoring/config.py.

Run from the repository root. Exit status: 0 done (or current with --check), 1 a file is stale
(--check), 2 a bad option.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import re
import sys
from pathlib import Path

from . import DEFAULT, outputs

ROOT = Path(__file__).resolve().parents[1]
_URL = re.compile(r"https?://[^\s#]+")


def _kubernetes_outputs() -> dict[Path, str]:
    """The Kubernetes wrappers of deploy/generate.py (they read the rule files and dashboards on disk)."""
    spec = importlib.util.spec_from_file_location("generate", ROOT / "deploy" / "generate.py")
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    return generate.outputs()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python3 -m monitoring",
        description="Write deploy/prometheus/sglang-{recording-rules,alerts}.yml, grafana/sglang-*.json and their "
                    "Kubernetes wrappers (deploy/kubernetes/example/) from monitoring/config.py.",
        epilog="example: python3 -m monitoring --runbook-base "
               "https://github.com/acme/sglang-exporter/blob/v0.1.0/docs/runbook.md --out /tmp/sglang-rules")
    parser.add_argument("--runbook-base", metavar="URL", default=DEFAULT.runbook_base,
                        help="absolute URL of docs/runbook.md (or a page with the same anchors); each alert's "
                             "runbook_url is URL#<alert name in lower case> (default: %(default)s)")
    parser.add_argument("--out", metavar="DIR", type=Path,
                        help="write the two rule files and the dashboards into DIR instead of the repository "
                             "(no Kubernetes wrappers); for a build with your own --runbook-base")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming each committed file that differs from what the config gives")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not _URL.fullmatch(args.runbook_base):
        print(f"python3 -m monitoring: --runbook-base must be an absolute http(s) URL without '#' or spaces, "
              f"got {args.runbook_base!r}", file=sys.stderr)
        return 2
    cfg = dataclasses.replace(DEFAULT, runbook_base=args.runbook_base)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        for rel, text in outputs(cfg).items():
            path = args.out / Path(rel).name
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
        return 0
    stale = []
    written = {ROOT / rel: text for rel, text in outputs(cfg).items()}
    for path, text in written.items():
        stale += _write_or_compare(path, text, args.check)
    for path, text in _kubernetes_outputs().items():  # after the sources above are written
        stale += _write_or_compare(path, text, args.check)
    for path in stale:
        print(f"{path.relative_to(ROOT)} is stale: run python3 -m monitoring", file=sys.stderr)
    return 1 if stale else 0


def _write_or_compare(path: Path, text: str, check: bool) -> list[Path]:
    current = path.read_text(encoding="utf-8") if path.exists() else None
    if current == text:
        return []
    if check:
        return [path]
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path.relative_to(ROOT)}")
    return []


if __name__ == "__main__":
    sys.exit(main())
