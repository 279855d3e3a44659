"""`kubecore images build-local`: build the node images locally and import them into containerd.

    kubecore images build-local --state-dir D     import into the containerd of node state dir D
    kubecore images build-local --socket S        import into the containerd serving socket S
    kubecore images build-local --output DIR      write DIR/busybox.tar and DIR/pause.tar (OCI layouts)

The images are `docker.io/library/busybox:latest` and the sandbox image `kubecore.local/pause:1.0`,
both built from this machine's static busybox (kubecore.kubelet.containerd.images); no registry is
contacted. Importing is idempotent: images already present with the same digest are left alone.
Exits 1 with a one-line message when busybox, ctr or the containerd socket is missing.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kubecore.kubelet.containerd import daemon, images


def register(sub: Any) -> None:
    p = sub.add_parser("images", help="node images (built locally, no registry)", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    cmds = p.add_subparsers(dest="images_command", metavar="SUBCOMMAND")
    cmds.required = True
    b = cmds.add_parser("build-local", help="build busybox and pause from the local busybox; import or write them")
    b.add_argument("--state-dir", help="the node state dir whose containerd gets the images")
    b.add_argument("--socket", help="a containerd socket to import into (instead of --state-dir)")
    b.add_argument("--output", help="also write the images as OCI tarballs into this directory")
    b.add_argument("--busybox", help="the static busybox binary to build from (default: the one on PATH)")
    b.set_defaults(run=run_build_local)


def run_build_local(args: argparse.Namespace) -> int:
    socket = args.socket or (str(daemon.Paths(args.state_dir).socket) if args.state_dir else None)
    if socket is None and not args.output:
        print("kubecore images build-local: give --state-dir, --socket or --output", file=sys.stderr)
        return 2
    try:
        built = images.build_local_images(args.busybox)
        if args.output:
            for path in images.write_image_tars(args.output, built):
                print(f"wrote {path}")
        if socket is not None:
            imported = set(images.ensure_local_images(socket, built=built))
            for image in built:
                print(f"{image.name} {image.digest} {'imported' if image.name in imported else 'already present'}")
    except (daemon.ContainerdError, OSError) as e:
        print(f"kubecore images build-local: {e}", file=sys.stderr)
        return 1
    return 0
