"""`kubecore`: the command line. Subcommands live in their own modules."""

from __future__ import annotations

import argparse
import sys

from kubecore.cli import apiserver_cmd, controller_manager_cmd, images_cmd, kubelet_cmd, scheduler_cmd, store_cmd


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kubecore", description="A Kubernetes-compatible cluster in one Python wheel.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    store_cmd.register(sub)
    apiserver_cmd.register(sub)
    controller_manager_cmd.register(sub)
    kubelet_cmd.register(sub)
    scheduler_cmd.register(sub)
    images_cmd.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
