"""``python3 -m testbed build [VERSION ...]`` | ``run SCENARIO OUT [--version V]`` | ``keep RUN_DIR NAME FEATURES`` | ``figures RECORDS``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import stack


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m testbed", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build the SGLang (and SGLang Omni) stacks and their tiny models into the cache (idempotent)")
    b.add_argument("versions", nargs="*", default=stack.stacks(), help=f"stacks (default: {' '.join(stack.stacks())})")
    r = sub.add_parser("run", help="run one scenario and keep its records under OUT")
    r.add_argument("scenario")
    r.add_argument("out", type=Path)
    r.add_argument("--version", default=stack.NEWEST)
    k = sub.add_parser("keep", help="copy a finished run's log into tests/corpus (header, paths redacted)")
    k.add_argument("run_dir", type=Path)
    k.add_argument("name", help="corpus file name without .log, e.g. 060-real-0.5.23-kv-pressure")
    k.add_argument("features", help="the INDEX features, comma-separated")
    f = sub.add_parser("figures", help="the sidecar's figures beside SGLang's counters, per kept run")
    f.add_argument("records", type=Path)
    args = p.parse_args(argv)
    if args.cmd == "figures":
        from .figures import main as figures

        print(figures(args.records))
        return 0
    if args.cmd == "keep":
        from .keep import keep

        print(keep(args.run_dir, args.name, args.features))
        return 0
    if args.cmd == "build":
        for v in args.versions:
            if v not in stack.stacks():
                p.error(f"unknown stack {v!r}; supported: {', '.join(stack.stacks())}")
            print(f"testbed: SGLang {v}: {stack.build(v)}", flush=True)
        return 0
    from . import scenarios

    if args.scenario not in scenarios.SCENARIOS:
        p.error(f"unknown scenario {args.scenario!r}; one of: {', '.join(scenarios.SCENARIOS)}")
    run = scenarios.SCENARIOS[args.scenario].run(args.out, args.version)
    print(f"testbed: {args.scenario} on SGLang {args.version}: records in {run.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
