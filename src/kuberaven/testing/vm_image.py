"""The nested nodes' guest (testing/): Debian's own kernel and a busybox initramfs, built once and cached.

    apt-get download <linux-image-amd64's kernel package> ──► dpkg-deb -x ──► boot/vmlinuz-* ──► its xz payload
        ──► vmlinux (an ELF: QEMU boots it directly, PVH)
    lib/modules/<release> ──► depmod -b ──► MODULES and what they need, in load order ──┐
    busybox-static's /bin/busybox, INIT ──────────────────────────────────────────────────┴► initramfs (cpio newc)

A guest needs no disk image: its /init (INIT) mounts the host's files over
9p (testing/vm.py) and runs the script the host left in the VM's own share.
The kernel is Debian's generic one, which ships the 802.1Q module (``8021q``)
that a nested pod's link needs. Everything comes from Debian's packages
through apt; the kernel's ``.deb`` is kept under the cache (``DEBS``).

The entry is keyed by the kernel package's and busybox-static's versions and
by what this module puts in the initramfs, under ``~/.cache/kuberaven/vm/``
(``XDG_CACHE_HOME`` moves it). Several processes may build at once (test
workers on a cold cache): one builds under the cache's flock, into a
directory of its own, and publishes it by one rename; the others wait and
reuse it.

    python -m kuberaven.testing.vm_image    # builds (or finds) it; prints its directory
"""

from __future__ import annotations

import contextlib
import hashlib
import lzma
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .cache_lock import locked

KERNEL_METAPACKAGE = "linux-image-amd64"  # depends on the current kernel package, linux-image-<release>
BUSYBOX_PACKAGE = "busybox-static"
BUSYBOX = Path("/bin/busybox")  # what busybox-static installs
GUEST_BUSYBOX = "busybox"  # the guest's directory of busybox and its applets: /bin and /sbin are the host's
# The 802.1Q links (8021q and what it needs), virtio's PCI NICs, the 9p shares over virtio.
MODULES = ("8021q", "garp", "mrp", "stp", "llc", "virtio_pci", "virtio_net", "9pnet_virtio", "9p")
XZ_MAGIC = b"\xfd7zXZ\x00"  # the start of an xz stream: Debian's bzImage carries vmlinux as one
ELF_MAGIC = b"\x7fELF"
CACHE_FORMAT = "1"  # bumped when what an entry holds changes in a way the key does not see
LOCK_NAME = ".lock"
BUILDING_PREFIX = ".building-"
KERNEL, INITRAMFS, RELEASE = "vmlinux", "initramfs.cpio", "release"  # the files of an entry
DEBS = "debs"  # beside the entries: the downloaded kernel packages
APT_TIMEOUT = 600.0  # seconds for one apt-get download (70 MB)
GUEST_DIRS = (GUEST_BUSYBOX, "dev", "etc", "proc", "sys", "run", "tmp", "root", "vm", "modules")
GUEST_ETC = {
    "passwd": "root:x:0:0:root:/root:/bin/sh\n",
    "group": "root:x:0:\n",
    "hosts": "127.0.0.1 localhost\n",
    "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
}

# The guest's first process: the kernel's virtual filesystems, the modules, the VM's own share (tag "vm"), then
# the host's script for this VM (testing/vm_boot.py), which links /bin, /sbin and /lib into the host's /usr, as
# on Debian (absolute links such as /usr/sbin/ip -> /bin/ip then find the host's programs, not busybox's).
# Whatever fails powers the guest off, and QEMU (-no-reboot) ends.
INIT = """#!/busybox/busybox sh
export PATH=/busybox
/busybox/busybox --install -s /busybox
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
while read -r module; do
  insmod "/modules/$module" || echo "krv-init: insmod $module failed"
done < /modules/order
if ! mount -t 9p -o trans=virtio,version=9p2000.L vm /vm; then
  echo "krv-init: the VM's share (tag vm) did not mount"
  /busybox/poweroff -f
fi
echo "krv-init: running /vm/boot.sh"
/busybox/sh /vm/boot.sh
echo "krv-init: /vm/boot.sh ended with $?"
/busybox/poweroff -f
"""


class ImageError(RuntimeError):
    """The guest could not be built; the message says which step failed."""


@dataclass(frozen=True)
class Guest:
    """A built guest: the kernel to boot, its initramfs, and the kernel's release (uname -r)."""

    kernel: Path
    initramfs: Path
    release: str


# -- pure parts ---------------------------------------------------------------------------------------


def kernel_package(depends: str) -> str:
    """The kernel package ``apt-cache depends linux-image-amd64`` names (its first linux-image-* Depends)."""
    for line in depends.splitlines():
        found = re.match(r"\s*\|?Depends:\s*(linux-image-\S+)", line)
        if found:
            return found.group(1)
    raise ImageError(f"{KERNEL_METAPACKAGE} depends on no linux-image package:\n{depends}")


def candidate_version(show: str) -> str:
    """The Version: of ``apt-cache show --no-all-versions``'s answer."""
    found = re.search(r"^Version:\s*(\S+)", show, re.MULTILINE)
    if not found:
        raise ImageError(f"no Version in:\n{show[:500]}")
    return found.group(1)


def cache_key(kernel: str, kernel_version: str, busybox_version: str) -> str:
    """An entry's name: the packages and their versions (readable), and a hash of what goes in the initramfs."""
    content = hashlib.sha256(f"{CACHE_FORMAT}\n{INIT}\n{MODULES}\n{GUEST_ETC}".encode()).hexdigest()[:8]
    name = f"{kernel}_{kernel_version}_busybox_{busybox_version}_{content}"
    return re.sub(r"[^A-Za-z0-9._-]", "-", name)


def xz_payload(bzimage: bytes) -> bytes:
    """The uncompressed kernel (an ELF) inside a bzImage whose payload is xz (Debian's): QEMU boots the ELF
    directly, faster than the bzImage under emulation."""
    start = bzimage.find(XZ_MAGIC)
    while start >= 0:
        with contextlib.suppress(lzma.LZMAError):
            kernel = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(bzimage[start:])
            if kernel.startswith(ELF_MAGIC):
                return kernel
        start = bzimage.find(XZ_MAGIC, start + 1)
    raise ImageError("no xz-compressed ELF kernel in the bzImage")


def load_order(modules_dep: str, wanted: tuple[str, ...] = MODULES) -> list[str]:
    """The modules' paths (as modules.dep names them) in the order insmod must load them: each one's
    dependencies first (modules.dep lists them deepest last), each once. KeyError naming a module not there."""
    deps: dict[str, list[str]] = {}
    for line in modules_dep.splitlines():
        path, _, needs = line.partition(":")
        deps[path] = needs.split()
    by_name = {_module_name(path): path for path in deps}
    order: list[str] = []
    for name in wanted:
        if name not in by_name:
            raise KeyError(f"module {name} is not in this kernel's modules.dep")
        for path in [*reversed(deps[by_name[name]]), by_name[name]]:
            if path not in order:
                order.append(path)
    return order


def _module_name(path: str) -> str:
    return Path(path).name.split(".ko")[0].replace("-", "_")


def cpio_newc(entries: list[tuple[str, int, bytes]]) -> bytes:
    """A cpio archive (newc, what the kernel unpacks as an initramfs) of ``entries``: (path, mode, data); a
    symlink's data is its target."""
    out = bytearray()
    for inode, (path, mode, data) in enumerate([*entries, ("TRAILER!!!", 0, b"")], start=1):
        name = path.encode() + b"\0"
        fields = (inode, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name), 0)
        out += b"070701" + b"".join(b"%08X" % field for field in fields) + name
        out += b"\0" * (-len(out) % 4) + data
        out += b"\0" * (-len(out) % 4)
    return bytes(out)


def initramfs_entries(busybox: bytes, modules: list[tuple[str, bytes]]) -> list[tuple[str, int, bytes]]:
    """The initramfs: its directories, busybox, INIT, GUEST_ETC, and ``modules`` (file name, content) with their
    load order in /modules/order."""
    directory, executable, regular = 0o040755, 0o100755, 0o100644
    entries = [(name, directory, b"") for name in GUEST_DIRS]
    entries += [(f"{GUEST_BUSYBOX}/busybox", executable, busybox), ("init", executable, INIT.encode())]
    entries += [(f"etc/{name}", regular, text.encode()) for name, text in GUEST_ETC.items()]
    entries += [(f"modules/{name}", regular, data) for name, data in modules]
    order = "".join(f"{name}\n" for name, _ in modules)
    return [*entries, ("modules/order", regular, order.encode())]


# -- the edges: apt, dpkg, depmod, the cache ----------------------------------------------------------


def cache_root() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "kuberaven" / "vm"


def guest() -> Guest:
    """The guest of the installed packages' versions: the cached one, or built now (under the cache's lock)."""
    kernel = kernel_package(_run(["apt-cache", "depends", KERNEL_METAPACKAGE]))
    version = candidate_version(_run(["apt-cache", "show", "--no-all-versions", kernel]))
    busybox = _run(["dpkg-query", "-W", "-f", "${Version}", BUSYBOX_PACKAGE]).strip()
    root = cache_root()
    published = root / cache_key(kernel, version, busybox)
    if not (published / KERNEL).is_file():
        root.mkdir(parents=True, exist_ok=True)
        with locked(root / LOCK_NAME):
            if not published.is_dir():  # else built by the process this one waited for
                _build_entry(root, published, kernel)
    return Guest(published / KERNEL, published / INITRAMFS, (published / RELEASE).read_text().strip())


def _build_entry(root: Path, published: Path, kernel: str) -> None:
    for abandoned in root.glob(f"{BUILDING_PREFIX}*"):  # a builder that died: only the lock's holder builds
        shutil.rmtree(abandoned, ignore_errors=True)
    work = Path(tempfile.mkdtemp(dir=root, prefix=BUILDING_PREFIX))
    try:
        build(_download(root / DEBS, kernel), work / "entry")
        os.rename(work / "entry", published)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _download(debs: Path, package: str) -> Path:
    """The package's .deb in ``debs``, downloaded by apt-get if it is not there yet."""
    debs.mkdir(parents=True, exist_ok=True)
    found = sorted(debs.glob(f"{package}_*.deb"))
    if not found:
        try:
            _run(["apt-get", "download", package], cwd=debs, timeout=APT_TIMEOUT)
        except ImageError as error:
            raise ImageError(f"{error}\n(apt's lists may be older than its mirror: `apt-get update`)") from None
        found = sorted(debs.glob(f"{package}_*.deb"))
    if not found:
        raise ImageError(f"apt-get download {package} left no .deb in {debs}")
    return found[-1]


def build(deb: Path, target: Path) -> None:
    """vmlinux, the initramfs and the release of the kernel package ``deb``, into the new directory ``target``."""
    with tempfile.TemporaryDirectory(prefix="kuberaven-guest-") as scratch:
        tree = Path(scratch)
        _run(["dpkg-deb", "-x", str(deb), str(tree)])
        modules_root = tree / "lib" / "modules"
        releases = sorted(p.name for p in modules_root.iterdir()) if modules_root.is_dir() else []
        if len(releases) != 1:
            raise ImageError(f"{deb.name}: expected one kernel release under lib/modules, found {releases}")
        release = releases[0]
        _run(["depmod", "-b", str(tree), release])
        order = load_order((modules_root / release / "modules.dep").read_text())
        modules = [(Path(path).name, (modules_root / release / path).read_bytes()) for path in order]
        target.mkdir(parents=True)
        (target / KERNEL).write_bytes(xz_payload((tree / "boot" / f"vmlinuz-{release}").read_bytes()))
        archive = cpio_newc(initramfs_entries(BUSYBOX.read_bytes(), modules))
        (target / INITRAMFS).write_bytes(archive)
        (target / RELEASE).write_text(release + "\n")


def _run(args: list[str], cwd: Path | None = None, timeout: float = 60.0) -> str:
    try:
        done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ImageError(f"{' '.join(args)}: {error} (`make deps` installs what the guest needs)") from None
    if done.returncode != 0:
        raise ImageError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return done.stdout


if __name__ == "__main__":
    print(guest().kernel.parent)
