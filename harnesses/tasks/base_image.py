"""Build the base image that Harbor tasks name in `FROM`, offline from a registry: a Debian rootfs.

    python -m harnesses.tasks.base_image TASKS_FOLDER        # tag it under every FROM image the folder uses
    python -m harnesses.tasks.base_image --tag NAME [--tag NAME ...]

For machines that reach package mirrors but no image registry (CI runners, this project's own): `debootstrap
--variant=minbase` makes the rootfs, the runtime imports it and tags it under the names the tasks' Dockerfiles
use in FROM (e.g. ghcr.io/laude-institute/t-bench/ubuntu-24-04:20250624), so their builds run unchanged; a task
that needs Ubuntu itself then builds on Debian, which the README says. The host's CA bundle is layered in under
a path of its own with SSL_CERT_FILE, PIP_CERT and REQUESTS_CA_BUNDLE pointing at it: behind an intercepting
proxy every download of a build needs it, and at the standard bundle path a task's own `apt-get install
ca-certificates` would overwrite it. Tags that already exist are left as they are unless --replace.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from raso.safe_files import remove_tree

from .containers import ContainerError, ContainerRuntime, find_runtime, setup_hint
from .folder import MAX_TEXT_BYTES, read_folder_text

DEFAULT_SUITE = "bookworm"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
CA_PATH = "/usr/local/share/raso-ca/ca-bundle.crt"
HOST_CA_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")
DEBOOTSTRAP_TIMEOUT_S = 1800
_FROM = re.compile(r"^\s*FROM\s+(?:--platform=\S+\s+)?(\S+)", re.IGNORECASE | re.MULTILINE)


def from_images(folder: Path) -> list[str]:
    """The images the Dockerfiles under `folder` (its task folders' environment/) name in FROM, sorted; stage
    names (`FROM build`) and `scratch` are not images."""
    images: set[str] = set()
    for dockerfile in sorted(folder.glob("**/environment/Dockerfile")):
        if dockerfile.is_symlink() or not dockerfile.is_file() or dockerfile.stat().st_size > MAX_TEXT_BYTES:
            continue
        text = read_folder_text(dockerfile, "the Dockerfile")
        stages = set(re.findall(r"^\s*FROM\s+\S+\s+AS\s+(\S+)", text, re.IGNORECASE | re.MULTILINE))
        images.update(i for i in _FROM.findall(text) if i.lower() != "scratch" and i not in stages and "$" not in i)
    return sorted(images)


def host_ca_bundle() -> Path | None:
    for candidate in (os.environ.get("SSL_CERT_FILE"), *HOST_CA_BUNDLES):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def _image_exists(runtime: ContainerRuntime, tag: str) -> bool:
    return runtime.run("image", "inspect", tag).exit_code == 0


def build_base_image(tags: list[str], runtime: ContainerRuntime, suite: str = DEFAULT_SUITE,
                     mirror: str = DEFAULT_MIRROR, replace: bool = False) -> list[str]:
    """Build the rootfs once and tag it under each of `tags` not already present (all with `replace`); returns the
    tags made. ContainerError (one line) when debootstrap is missing or a step fails."""
    wanted = [t for t in tags if replace or not _image_exists(runtime, t)]
    if not wanted:
        return []
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise ContainerError("building a base image needs debootstrap (Debian: apt-get install debootstrap)")
    work = Path(tempfile.mkdtemp(prefix="raso-base-image-"))
    try:
        rootfs = work / "rootfs"
        made = subprocess.run([debootstrap, "--variant=minbase", suite, str(rootfs), mirror], capture_output=True,
                              text=True, timeout=DEBOOTSTRAP_TIMEOUT_S, check=False)
        if made.returncode != 0:
            last = (made.stderr or made.stdout).strip().splitlines()[-1:] or ["no output"]
            raise ContainerError(f"debootstrap {suite} failed (exit {made.returncode}): {last[0][:200]}")
        changes = ["--change", "CMD [\"/bin/bash\"]"]
        bundle = host_ca_bundle()
        if bundle is not None:
            target = rootfs / CA_PATH.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(bundle, target)
            for variable in ("SSL_CERT_FILE", "PIP_CERT", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"):
                changes += ["--change", f"ENV {variable}={CA_PATH}"]
        archive = work / "rootfs.tar"
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(archive), "."], check=True, capture_output=True)
        first, *others = wanted
        runtime.check("import", *changes, str(archive), first, what=f"importing the {suite} rootfs as {first}",
                      timeout_s=600)
        for tag in others:
            runtime.check("tag", first, tag, what=f"tagging {first} as {tag}")
        check = runtime.run("run", "--rm", first, "true")
        if check.exit_code != 0:
            raise ContainerError(f"{runtime.name} cannot run the new image {first}: "
                                 f"{check.output.strip()[-200:]}{setup_hint(check.output)}")
        return wanted
    finally:
        remove_tree(work)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harnesses.tasks.base_image", description=__doc__.split("\n")[0])
    parser.add_argument("folder", nargs="?", type=Path, help="a tasks folder: tag under every image its FROM lines name")
    parser.add_argument("--tag", action="append", default=[], help="an image name to tag (repeatable)")
    parser.add_argument("--suite", default=DEFAULT_SUITE, help=f"Debian suite (default {DEFAULT_SUITE})")
    parser.add_argument("--mirror", default=DEFAULT_MIRROR, help=f"Debian mirror (default {DEFAULT_MIRROR})")
    parser.add_argument("--runtime", default="auto", choices=["auto", "podman", "docker"])
    parser.add_argument("--replace", action="store_true", help="rebuild tags that already exist")
    args = parser.parse_args(argv)
    tags = list(args.tag)
    if args.folder is not None:
        if not args.folder.is_dir():
            parser.error(f"{args.folder} is not a folder")
        tags += from_images(args.folder)
    if not tags:
        parser.error("name a tasks folder or at least one --tag")
    try:
        made = build_base_image(sorted(set(tags)), find_runtime(args.runtime), args.suite, args.mirror, args.replace)
    except (ContainerError, subprocess.SubprocessError, OSError) as exc:
        print(f"base image: {exc}", file=sys.stderr)
        return 1
    for tag in sorted(set(tags)):
        print(f"{'built' if tag in made else 'kept'} {tag}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
