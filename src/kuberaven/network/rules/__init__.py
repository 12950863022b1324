"""The network translation's rules (network/rules/): pure functions of plain data, no I/O.

    translate.py       namespace → network and subnet, pod → port, the VIF
    services.py        Service + endpoints → load balancer, listeners, pools, members
    lb_annotations.py  cloud-provider-openstack's load balancer annotations → options
    policy.py          NetworkPolicy → security group rules, which pods a policy selects
    reach.py           which rule lets a packet in (can-reach)
    listing.py         what `kuberaven net get` shows
    trunks.py          which nodes are nested on a trunk, the VLAN ids of its subports

The reconcilers (network/reconcilers/) call them and do the I/O.
"""
