"""The ``stoker`` command line: ``stoker demo``, ``stoker index``."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence


def _build_parser() -> argparse.ArgumentParser:
    from stoker.cli import demo, index

    parser = argparse.ArgumentParser(
        prog="stoker",
        description="Stoker: a native data engine that keeps VLM fine-tuning GPUs fed.",
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo.add_parser(commands)
    index.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from stoker import __version__

        print(f"stoker {__version__}")
        return 0
    if args.command is None:
        parser.print_help()
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from stoker.errors import StokerError

    try:
        return int(args.run(args) or 0)
    except (StokerError, OSError, ValueError) as e:
        print(f"stoker {args.command}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


__all__ = ["main"]
