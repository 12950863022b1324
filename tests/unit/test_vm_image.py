"""The nested nodes' guest, built from plain data (testing/vm_image.py): which kernel package apt names, the cache
key, vmlinux out of a bzImage's xz payload, the modules' load order from modules.dep, and the initramfs' cpio."""

from __future__ import annotations

import lzma

import pytest

from kuberaven.testing.vm_image import (
    GUEST_BUSYBOX,
    INIT,
    MODULES,
    ImageError,
    cache_key,
    candidate_version,
    cpio_newc,
    initramfs_entries,
    kernel_package,
    load_order,
    xz_payload,
)

DEPENDS = """linux-image-amd64
  Depends: linux-image-6.1.0-57-amd64
  Suggests: firmware-linux
"""
# modules.dep as depmod writes it for Debian 12's kernel: each module's dependencies, the deepest last.
MODULES_DEP = """kernel/net/8021q/8021q.ko: kernel/net/802/garp.ko kernel/net/802/mrp.ko kernel/net/802/stp.ko kernel/net/llc/llc.ko
kernel/net/802/garp.ko: kernel/net/802/stp.ko kernel/net/llc/llc.ko
kernel/net/802/mrp.ko:
kernel/net/802/stp.ko: kernel/net/llc/llc.ko
kernel/net/llc/llc.ko:
kernel/drivers/virtio/virtio.ko:
kernel/drivers/virtio/virtio_ring.ko:
kernel/drivers/virtio/virtio_pci_legacy_dev.ko:
kernel/drivers/virtio/virtio_pci_modern_dev.ko:
kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio_pci_legacy_dev.ko kernel/drivers/virtio/virtio_pci_modern_dev.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/net/virtio_net.ko: kernel/drivers/net/net_failover.ko kernel/net/core/failover.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/net/net_failover.ko: kernel/net/core/failover.ko
kernel/net/core/failover.ko:
kernel/net/9p/9pnet.ko:
kernel/net/9p/9pnet_virtio.ko: kernel/net/9p/9pnet.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/fs/9p/9p.ko: kernel/net/9p/9pnet.ko kernel/fs/fscache/fscache.ko kernel/fs/netfs/netfs.ko
kernel/fs/netfs/netfs.ko:
kernel/fs/fscache/fscache.ko: kernel/fs/netfs/netfs.ko
"""  # noqa: E501


def test_the_kernel_package_is_the_metapackages_linux_image_dependency_at_its_candidate_version() -> None:
    assert kernel_package(DEPENDS) == "linux-image-6.1.0-57-amd64"
    assert candidate_version("Package: linux-image-6.1.0-57-amd64\nVersion: 6.1.192-3\n") == "6.1.192-3"
    with pytest.raises(ImageError, match="depends on no linux-image package"):
        kernel_package("linux-image-amd64\n  Suggests: firmware-linux\n")


def test_the_cache_key_names_the_versions_and_changes_with_them_only() -> None:
    key = cache_key("linux-image-6.1.0-57-amd64", "6.1.192-3", "1:1.35.0-4+deb12u1+b1")
    assert key.startswith("linux-image-6.1.0-57-amd64_6.1.192-3_busybox_1-1.35.0-4-deb12u1-b1_")
    assert "/" not in key and ":" not in key and "+" not in key
    assert key == cache_key("linux-image-6.1.0-57-amd64", "6.1.192-3", "1:1.35.0-4+deb12u1+b1")
    assert key != cache_key("linux-image-6.1.0-58-amd64", "6.1.193-1", "1:1.35.0-4+deb12u1+b1")


def test_vmlinux_is_the_xz_stream_of_the_bzimage_that_holds_an_elf() -> None:
    elf = b"\x7fELF" + bytes(range(256)) * 40
    not_elf = lzma.compress(b"setup code, not a kernel", format=lzma.FORMAT_XZ)
    bzimage = b"MZ boot sector" + not_elf + b"\0" * 100 + lzma.compress(elf, format=lzma.FORMAT_XZ) + b"trailer"
    assert xz_payload(bzimage) == elf
    with pytest.raises(ImageError, match="no xz-compressed ELF kernel"):
        xz_payload(b"MZ" + not_elf)


def test_modules_load_after_what_they_need_each_once() -> None:
    order = load_order(MODULES_DEP)
    names = [path.rsplit("/", 1)[1].removesuffix(".ko") for path in order]
    assert set(names) >= set(MODULES) and len(names) == len(set(names))
    for module, needs in (("8021q", "garp"), ("garp", "stp"), ("stp", "llc"), ("virtio_net", "failover"),
                          ("9p", "netfs"), ("fscache", "netfs"), ("9pnet_virtio", "virtio_ring")):  # fmt: skip
        assert names.index(needs) < names.index(module), (needs, module)
    with pytest.raises(KeyError, match=r"module 8021q is not in this kernel's modules\.dep"):
        load_order("kernel/net/llc/llc.ko:\n")


def unpack(archive: bytes) -> dict[str, tuple[int, bytes]]:
    """A newc cpio archive read back: path → (mode, data), as the kernel reads an initramfs."""
    files: dict[str, tuple[int, bytes]] = {}
    at = 0
    while True:
        assert archive[at : at + 6] == b"070701"
        fields = [int(archive[at + 6 + 8 * i : at + 14 + 8 * i], 16) for i in range(13)]
        mode, size, name_size = fields[1], fields[6], fields[11]
        name_at = at + 110
        name = archive[name_at : name_at + name_size - 1].decode()
        data_at = name_at + name_size + (-(name_at + name_size) % 4)
        if name == "TRAILER!!!":
            return files
        files[name] = (mode, archive[data_at : data_at + size])
        at = data_at + size + (-(data_at + size) % 4)


def test_the_initramfs_holds_busybox_init_and_the_modules_with_their_order() -> None:
    modules = [("llc.ko", b"llc"), ("stp.ko", b"stp-module")]
    files = unpack(cpio_newc(initramfs_entries(b"BUSYBOX", modules)))
    assert files[f"{GUEST_BUSYBOX}/busybox"] == (0o100755, b"BUSYBOX")
    assert files["init"] == (0o100755, INIT.encode())
    assert files["modules/stp.ko"][1] == b"stp-module" and files["modules/order"][1] == b"llc.ko\nstp.ko\n"
    assert files["etc/passwd"][1].startswith(b"root:x:0:0:")
    assert all(files[name][0] == 0o040755 for name in ("dev", "proc", "sys", "run", "vm", "modules"))
    assert "bin" not in files  # /bin is the host's (a link into the shared /usr), made at boot
