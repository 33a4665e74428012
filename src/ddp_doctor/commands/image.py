"""`ddp-doctor image PATH`: a static audit of a container image; the image is read, never run."""

from __future__ import annotations

import argparse

from ddp_doctor import progress
from ddp_doctor.commands.options import Size, add_output_arguments, count
from ddp_doctor.image.audit import audit
from ddp_doctor.image.limits import Limits
from ddp_doctor.report import Report


def add_arguments(parser: argparse.ArgumentParser) -> None:

    parser.add_argument(
        "path", metavar="PATH", help="docker save tarball, OCI layout dir, OCI archive, rootfs tarball or rootfs dir"
    )
    parser.add_argument(
        "--platform", default="linux/amd64", help="platform to pick from a multi-platform index (default: linux/amd64)"
    )
    d = Limits()
    parser.add_argument(
        "--max-bytes",
        type=Size(1, 1 << 50),
        default=d.max_total_bytes,
        metavar="SIZE",
        help="stop when the layers expand past SIZE uncompressed (default: 256G)",
    )
    parser.add_argument(
        "--max-entry-bytes",
        type=Size(1, 1 << 50),
        default=d.max_entry_bytes,
        metavar="SIZE",
        help="largest layer blob or file allowed (default: 64G)",
    )
    parser.add_argument(
        "--max-entries",
        type=count("entries", 1, 1 << 40),
        default=d.max_entries,
        metavar="N",
        help="most entries across all layers (default: 2000000)",
    )
    parser.add_argument(
        "--verify-diff-ids",
        action="store_true",
        help="also check each compressed layer's uncompressed sha256 against the config's diff_ids "
        "(the blob digests are always checked; this costs one more hash pass)",
    )
    add_output_arguments(parser)


def inputs(args: argparse.Namespace) -> list[str]:
    return [args.path]


def run(args: argparse.Namespace) -> Report:

    limits = Limits(
        max_total_bytes=args.max_bytes,
        max_entry_bytes=args.max_entry_bytes,
        max_entries=args.max_entries,
        verify_diff_ids=args.verify_diff_ids,
    )

    layer = progress.Latest(("", [0]))
    shown = progress.Display("image", lambda: progress.layer_lines(*layer.get()))
    with progress.live(shown, progress.wanted(args.format, args.quiet, args.output)):
        return audit(args.path, args.platform, limits, on_layer=lambda what, read: layer.set((what, read)))
