"""Nested nodes as real VMs on the local OVN data path (testing/): `kuberaven testenv up --openstack --nested N`.

    Neutron (nested.py): network kuberaven-vms ──► per VM a port bound to the chassis + a trunk on it
    chassis netns: br-int ── vmtap<i> (iface-id = the port, attached-mac = its MAC, as os-vif plugs a VM)
                                 ║ a tap: QEMU's trunk NIC (vm_tap.py opens it there, QEMU runs in the root netns)
    QEMU (TCG unless KVM works): Debian's kernel with 8021q (vm_image.py), the host's files over 9p (vm_boot.py)
        guest eth0 = the port's MAC/IP/MTU; a pod = a netns with an 802.1Q link on eth0 (the subport's VLAN id)
        guest ctl0 = QEMU's user-mode network: the command server (vm_guest.py) and the API server's relay
    the guest's `kuberaven node` (no Open vSwitch) runs through `python -m kuberaven.testing.vm_exec <VM dir>`

A VM's directory (``<env>/vms/<node>``) is its 9p share "vm": boot.sh,
guest.json, the kubeconfig, and console.log (the serial console). A VM that
does not answer within BOOT_WITHIN, or whose QEMU ends, fails the start with
its console's tail. stop() ends QEMU and removes the taps; QEMU dies with the
environment's supervisor (PR_SET_PDEATHSIG), and its tap with the chassis'
netns.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .free_ports import free_port
from .nested import Vm, neutron_vms, wait_active
from .ovn import INTEGRATION_BRIDGE, OVNError
from .processes import Process, stop_all
from .vm_boot import CONTROL_MAC, GuestNet, boot_script, guest_config, qemu_command, shares
from .vm_exec import CONTROL_FILE, Control, GuestUnreachable, run
from .vm_image import guest

if TYPE_CHECKING:
    from .openstack import LocalOpenStack

BOOT_WITHIN = 180.0  # seconds for a guest's command server to answer (TCG on a loaded 2-core machine)
AGENT_READY_WITHIN = 240.0  # seconds for the guest's agent's STATUS to succeed (≈5 s of imports under TCG)
POLL_EVERY = 1.0  # seconds between two tries of a guest that is not ready
PROBE_TIMEOUT = 30.0  # seconds one try may take
CONSOLE_TAIL = 30  # lines of a guest's console told when it fails
ACCEL_VARIABLE = "KUBERAVEN_VM_ACCEL"  # "tcg" or "kvm": overrides kvm_usable()
HARDWARE_KVM = ("kvm_intel", "kvm_amd")  # modules of a KVM that runs any guest (not kvm_pvm's)
GUEST_SOCKET = "/run/kuberaven/cni-{node}.sock"  # the guest's agent's socket (named per node: agent_pid finds it)
AGENT_PID = "/run/kuberaven/agent.pid"
GUEST_KUBECONFIG = "/vm/kubeconfig"
CNI_PLUGIN = ("-m", "kuberaven.cni.plugin")  # run with the virtualenv's Python, in the guest


class VmError(RuntimeError):
    """A VM did not come up; the message says which and why (its console's tail)."""


def kvm_usable() -> bool:
    """Whether QEMU may use KVM: ACCEL_VARIABLE says so, or /dev/kvm is a hardware KVM's (a software one, such as
    kvm_pvm, runs only specially built guest kernels, not Debian's)."""
    chosen = os.environ.get(ACCEL_VARIABLE)
    if chosen:
        return chosen == "kvm"
    return os.access("/dev/kvm", os.R_OK | os.W_OK) and any(Path("/sys/module", m).exists() for m in HARDWARE_KVM)


SOURCE = Path(__file__).resolve().parents[2]  # the project's src/: <checkout>/src/kuberaven/testing/vm.py


def project_paths() -> list[Path]:
    """What the guest must see of the host, read-only: /usr, the Python the virtualenv is made of, the virtualenv
    and the project's checkout (src and what its editable installs point at)."""
    checkout = SOURCE.parent
    return [Path("/usr"), Path(sys.base_prefix).resolve(), Path(sys.prefix), checkout]


class QemuVms:
    """``count`` VMs on ``openstack``'s chassis, in ``directory``; ``relayed_ports``: the host's ports a guest
    reaches at its own 127.0.0.1 (the API server's)."""

    def __init__(self, openstack: LocalOpenStack, count: int, directory: Path, relayed_ports: list[int]) -> None:
        assert openstack.ovn is not None, "VMs need the data path"
        self.openstack, self.ovn, self.count = openstack, openstack.ovn, count
        self.dir, self.relayed_ports = directory, relayed_ports
        self.vms: list[Vm] = []
        self.processes: list[Process] = []  # QEMU, one per VM: the supervisor stops the environment if one dies
        self.taps: list[str] = []
        self.boot_seconds: dict[str, float] = {}

    def vm_dir(self, vm: Vm) -> Path:
        return self.dir / vm.node

    def control(self, vm: Vm) -> Control:
        return Control.load(self.vm_dir(vm))

    def start(self) -> list[Vm]:
        """The VMs' ports, every VM booted at once, then each answering and its port ACTIVE."""
        image = guest()
        self.vms, prefix, mtu = neutron_vms(self.openstack, self.count, lambda index: "")
        shared = shares(project_paths())
        accel = "kvm" if kvm_usable() else "tcg"
        started = time.monotonic()
        for index, vm in enumerate(self.vms):
            net = GuestNet(vm.mac, vm.ip, prefix, mtu, CONTROL_MAC.format(index=index))
            self._boot(vm, index, net, shared, image.kernel, image.initramfs, accel)
        for vm, qemu in zip(self.vms, self.processes, strict=True):
            self._wait_booted(vm, qemu)
            self.boot_seconds[vm.node] = round(time.monotonic() - started, 2)
        wait_active(self.openstack, self.vms)
        return self.vms

    def _boot(self, vm: Vm, index: int, net: GuestNet, shared: list[tuple[str, Path]], kernel: Path,
              initramfs: Path, accel: str) -> None:  # fmt: skip
        """VM ``index``'s directory, its tap on br-int as the trunk's parent port, and its QEMU started."""
        directory = self.vm_dir(vm)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "console.log").write_text("")
        token, host_port = secrets.token_hex(16), free_port()
        python, src = sys.executable, SOURCE
        (directory / "boot.sh").write_text(boot_script(vm.node, net, shared, python, src))
        (directory / "guest.json").write_text(json.dumps(guest_config(token, self.relayed_ports)))
        control = directory / CONTROL_FILE
        control.touch(mode=0o600)
        control.write_text(json.dumps({"host": "127.0.0.1", "port": host_port, "token": token}))
        tap = f"vmtap{index}"
        self._plug(tap, vm, net.mtu)
        qemu = qemu_command(kernel, initramfs, directory, shared, vm.mac, index, host_port, accel)
        helper = [sys.executable, "-m", "kuberaven.testing.vm_tap", self.ovn.node_netns, tap, "--"]
        process = Process(f"qemu-{vm.node}", [*helper, *qemu], directory, stop_timeout=5.0)
        process.start()
        self.processes.append(process)

    def _plug(self, tap: str, vm: Vm, mtu: int) -> None:
        """A tap in the chassis' netns on br-int, as os-vif plugs an instance: iface-id = the port, its MAC."""
        netns, run_ctl = self.ovn.node_netns, self.ovn.ctl
        subprocess.run(["ip", "-n", netns, "link", "del", tap], capture_output=True, check=False)  # a crashed run's
        run_ctl("ip", "-n", netns, "tuntap", "add", "dev", tap, "mode", "tap")
        self.taps.append(tap)
        run_ctl("ip", "-n", netns, "link", "set", tap, "mtu", str(mtu), "up")
        external = (f"external_ids:iface-id={vm.port}", f"external_ids:attached-mac={vm.mac}",
                    "external_ids:iface-status=active")  # fmt: skip
        run_ctl(
            "ovs-vsctl", "--may-exist", "add-port", INTEGRATION_BRIDGE, tap, "--", "set", "Interface", tap, *external
        )

    def _wait_booted(self, vm: Vm, qemu: Process) -> None:
        """Until the guest's command server runs a command; VmError with the console's tail if QEMU ends or
        BOOT_WITHIN passes first."""
        deadline, last = time.monotonic() + BOOT_WITHIN, ""
        while time.monotonic() < deadline:
            if not qemu.alive():
                raise VmError(f"{vm.node}: QEMU ended ({qemu.returncode}):\n{qemu.tail()}\n{self.console(vm)}")
            try:
                code, _, _ = run(self.control(vm), ["true"], timeout=PROBE_TIMEOUT)
                if code == 0:
                    return
            except (GuestUnreachable, TimeoutError) as error:
                last = str(error)
            time.sleep(POLL_EVERY)
        raise VmError(f"{vm.node} did not boot within {BOOT_WITHIN:.0f}s ({last}); its console:\n{self.console(vm)}")

    def console(self, vm: Vm, lines: int = CONSOLE_TAIL) -> str:
        """The last ``lines`` of the VM's serial console."""
        path = self.vm_dir(vm) / "console.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def start_agent(self, vm: Vm, kubeconfig: Path, logs: Path) -> Process:
        """`kuberaven node` in the guest (no --ovsdb: no Open vSwitch there; the guest's own netns is the node's),
        run through vm_exec (its log: the agent's output), returned once its STATUS succeeds in the guest."""
        (self.vm_dir(vm) / "kubeconfig").write_bytes(kubeconfig.read_bytes())
        socket = GUEST_SOCKET.format(node=vm.node)
        agent = [sys.executable, "-m", "kuberaven", "node", "--node", vm.node, "--kubeconfig", GUEST_KUBECONFIG,
                 "--socket", socket]  # fmt: skip
        in_guest = ["sh", "-c", f'echo $$ > {AGENT_PID} && exec "$@"', "agent", *agent]
        process = Process(f"kuberaven-node-{vm.node}", [*self.exec_command(vm), "--", *in_guest], logs)
        process.start()
        deadline = time.monotonic() + AGENT_READY_WITHIN
        while not self.agent_ready(vm):
            if not process.alive() or time.monotonic() > deadline:
                process.stop()
                raise VmError(f"the agent of {vm.node} did not become ready:\n{process.tail()}\n{self.console(vm)}")
            time.sleep(POLL_EVERY)
        return process

    def agent_ready(self, vm: Vm) -> bool:
        """kuberaven-cni's STATUS in the guest succeeds (the agent's watch synced)."""
        status = {"CNI_COMMAND": "STATUS", "CNI_PATH": "/opt/cni/bin"}
        config = json.dumps(self.cni_config(vm)).encode()
        try:
            code, _, _ = run(self.control(vm), [sys.executable, *CNI_PLUGIN], status, config, PROBE_TIMEOUT)
        except (GuestUnreachable, TimeoutError):
            return False
        return code == 0

    def exec_command(self, vm: Vm) -> list[str]:
        """The host's command that runs in the guest what follows it (vm_exec.py: ``[-i] [-e NAME=VALUE]… --
        command…``)."""
        return [sys.executable, "-m", "kuberaven.testing.vm_exec", str(self.vm_dir(vm))]

    def cni_config(self, vm: Vm) -> dict[str, Any]:
        from .agents import cni_config

        return cni_config(Path(GUEST_SOCKET.format(node=vm.node)))

    def stop(self) -> None:
        """QEMU, then the taps and their ports on br-int (if the chassis still runs)."""
        stop_all(self.processes)
        self.processes.clear()
        for tap in self.taps:
            with contextlib.suppress(OVNError, OSError, subprocess.SubprocessError):  # else the chassis has stopped
                self.ovn.ctl("ovs-vsctl", "--timeout=5", "--if-exists", "del-port", INTEGRATION_BRIDGE, tap)
            subprocess.run(["ip", "-n", self.ovn.node_netns, "link", "del", tap], capture_output=True, check=False)
        self.taps.clear()
        self.vms.clear()

    def describe(self, _: dict[str, Any], vm: Vm) -> dict[str, Any]:
        """For env.json: how to run a command in the VM (``exec``, then the command), the cni_config a runtime
        there gives kuberaven-cni (``cni``: how to run it there), and the VM's port, trunk and console."""
        return {"node": vm.node, "kind": "qemu", "address": vm.ip, "mac": vm.mac, "port": vm.port,
                "trunk": vm.trunk, "cni_config": self.cni_config(vm), "exec": self.exec_command(vm),
                "cni": [sys.executable, *CNI_PLUGIN], "python": sys.executable, "agent_pid_file": AGENT_PID,
                "dir": str(self.vm_dir(vm)), "boot_seconds": self.boot_seconds.get(vm.node)}  # fmt: skip
