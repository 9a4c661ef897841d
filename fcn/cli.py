"""The ``fcn`` command line."""

from __future__ import annotations

import argparse
import sys

import fcn


def _cmd_info(args: argparse.Namespace) -> int:
    from fcn.model import CROP_OFFSETS, build_model

    model = build_model(args.variant, weights=None)
    model.summary(line_length=110)
    print(f"parameters: {model.count_params():,}")
    print(f"crop offsets: {CROP_OFFSETS[args.variant]}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fcn",
        description="FCN-8s/16s/32s semantic segmentation on TensorFlow/Keras 3.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  fcn info --variant fcn8s\n",
    )
    parser.add_argument("--version", action="version", version=f"fcn {fcn.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    info = sub.add_parser("info", help="build a model and print its layers, size and crop offsets")
    info.add_argument("--variant", default="fcn8s", choices=fcn.VARIANTS)
    info.set_defaults(func=_cmd_info)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
