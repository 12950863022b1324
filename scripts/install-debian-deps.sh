#!/usr/bin/env bash
# Installs the Debian packages kuberaven's local control plane and tests need.
# Idempotent: does nothing when everything is already present.
set -euo pipefail

PACKAGES=(golang-go etcd-server rsync jq golang-github-modern-go-reflect2-dev
          postgresql python3-venv dpkg-dev openssl procps ca-certificates
          # A real Neutron + Octavia for the openstack network backend's tests (testing/openstack.py).
          neutron-server octavia-api octavia-worker mariadb-server mariadb-client python3-pymysql rabbitmq-server
          # Its data path: Open vSwitch (userspace datapath) and OVN, Octavia's ovn provider (testing/ovn.py).
          openvswitch-switch openvswitch-common ovn-central ovn-host ovn-common python3-ovn-octavia-provider
          # kube-proxy beside kuberaven for node ports (testing/node_ports.py): iptables (the nft variant) and
          # conntrack, which it calls.
          iptables conntrack
          # Nested nodes as real VMs on that data path (testing/vm.py): QEMU, and busybox for the guests'
          # initramfs; the guests' kernel is Debian's linux-image-amd64, fetched by `make guest` with apt-get download.
          qemu-system-x86 busybox-static
          # Pod-to-pod TCP throughput on that data path (bench/ovn_throughput_bench.py).
          iperf3
          # Headless browser tests of the web UI (tests/integration/test_web_ui.py).
          chromium chromium-driver)

# kubectl for the commands in the docs (Debian's is 1.20, as the local control plane); another one will do.
if ! command -v kubectl >/dev/null 2>&1; then PACKAGES+=(kubernetes-client); fi
# npm installs the web UI's plotting and graph libraries (make web-libs); another npm will do.
if ! command -v npm >/dev/null 2>&1; then PACKAGES+=(npm); fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

# deb-src entries are derived from the machine's own apt sources, so whatever
# mirror the machine is configured with also serves the kubernetes source.
ensure_deb_src() {
  if grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    return 1
  fi
  local added=1
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -e "$f" ] || continue
    grep -q '^Types: deb$' "$f" || continue
    sed 's/^Types: deb$/Types: deb-src/' "$f" | $SUDO tee "/etc/apt/sources.list.d/kuberaven-src-$(basename "$f")" >/dev/null
    added=0
  done
  if [ -f /etc/apt/sources.list ] && grep -q '^deb ' /etc/apt/sources.list; then
    sed -n 's/^deb /deb-src /p' /etc/apt/sources.list | $SUDO tee /etc/apt/sources.list.d/kuberaven-src.list >/dev/null
    added=0
  fi
  return $added
}

need_update=0
if ensure_deb_src; then need_update=1; fi
if [ ${#missing[@]} -gt 0 ]; then need_update=1; fi
if [ "${KUBERAVEN_NEED_SOURCE:-0}" = 1 ] && ! apt-cache showsrc kubernetes 2>/dev/null | grep -q '^Package: kubernetes'; then
  need_update=1
fi

if [ $need_update = 1 ]; then
  $SUDO apt-get update -qq
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing Debian packages: ${missing[*]}" >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
