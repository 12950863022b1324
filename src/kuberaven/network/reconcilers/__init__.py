"""The network translation's reconcilers (network/reconcilers/): one per kind of object, each level-triggered.

    namespaces.py        Namespace → network, subnet and security group
    pods.py              Pod → port with its groups and status (and the VIF annotation when our CNI wires it)
    pod_vif.py           the pods reconciler's writes to pods: the VIF annotation, its port's Events
    loadbalancers.py     Service + EndpointSlices/Endpoints → load balancer, floating IP
    network_policies.py  NetworkPolicy → security groups, the groups the selected pods' ports should carry
    nodes.py             Node → the port pools follow the nodes (only with port pools)
    context.py           what they share (client, translation store, backend, options, cluster, threads, the Event
                         recorder, the pods reconciler's queue), given once from the cluster's translation runtime

Each reads through listers, decides with network/rules/ and acts through the backend.
"""
