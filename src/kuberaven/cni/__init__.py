"""kuberaven-cni (cni/): the CNI plugin that wires a pod into the network kuberaven made for it.

    container runtime ──(CNI_* environment, network config on stdin)──► plugin.py
        ADD:   the pod's VIF annotation (network/vif.py, written by the translator) ──► links.py:
               veth pair, pod end in the pod's netns with the port's MAC, IP and routes,
               host end on the network's bridge, or on OVS's br-int for OVN to bind
               ──► (OVS: until the VIF says the port is ACTIVE) ──► result JSON on stdout
        DEL:   the OVS port record, the veth pair (and the bridge once empty);  CHECK: compare with the VIF;
        VERSION

spec.py holds the CNI specification's rules as pure functions (what an
invocation says, the result, the errors); links.py runs ``ip`` and ``ovs-vsctl``.
"""
