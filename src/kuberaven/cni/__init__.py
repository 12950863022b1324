"""kuberaven-cni (cni/): the CNI plugin, and what it shares with the node agent that does its work (node/).

    container runtime ──(CNI_* environment, network config on stdin)──► plugin.py (a thin client)
        ──protocol.py over a unix socket──► `kuberaven node` (node/) ──► spec.py, links.py
            ADD:   the pod's VIF (network/vif.py, written by the translator, brought by the agent's watch)
                   ──► links.py: veth pair, pod end in the pod's netns with the port's MAC, IP and routes,
                   host end on the network's bridge, or on OVS's br-int for OVN to bind
                   ──► (OVS: until ovn-installed, or the VIF's ACTIVE) ──► result JSON on stdout
            DEL:   the OVS port record, the veth pair (and the bridge once empty);  CHECK: compare with the VIF;
            STATUS, GC (CNI 1.1);  VERSION: answered by plugin.py itself

protocol.py and plugin.py use the standard library only (the runtime starts
the plugin once per call); spec.py holds the CNI specification's rules as pure
functions (what an invocation says, the result, the errors, GC's choice);
links.py runs ``ip`` and ``ovs-vsctl``.
"""
