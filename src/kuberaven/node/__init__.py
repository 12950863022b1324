"""The node agent (node/): `kuberaven node`, run on every node by deploy/kuberaven-cni.yaml's DaemonSet.

    kuberaven-cni (cni/plugin.py, a thin client) ──unix socket──► server.py ──► calls.py ──► cni/links.py
    API server ──watch of this node's pods──► pods.py (the VIFs) ─────────────────┘      └─► readiness.py

agent.py joins them. cni/ holds what the plugin and the agent share: the
socket's protocol (protocol.py), the CNI specification's rules (spec.py) and
the kernel's wiring (links.py).
"""
