"""Network translation (network/): Kubernetes objects become networks, ports, load balancers and security groups.

translator.py       the component: the cluster's informers ──► the reconcilers ──► a backend; garbage collection
translation_runtime.py  one per cluster: the client, informers, store, threads, Event recorder and reports shared
reconcilers/        one level-triggered reconciler per kind of object (namespaces, pods, Services, policies, nodes)
rules/              the pure rules: what to make of an object, a policy, an annotation, a pool, a reach question
backend.py          what every backend shares: the tags that find its resources, its errors, the options
drivers/            the backend interface: a driver per concept (ports, pools, load balancers, groups, status)
backends/           its two implementations: embedded (kuberaven's tables) and openstack (Neutron + Octavia)
state.py            the translation rows (object uid ↔ backend ids) in the database
annotations.py      the annotations the translator writes on Kubernetes objects
vif.py              the VIF annotation: a pod's port as kuberaven-cni reads it
pod_network.py      a pod's network as one record (its row, its VIF), and the groups its port should carry
pools.py            port pools: ports made ahead in bulk per node and namespace, taken by pods
pool_asks.py        port pools: what a pod asks, the port it took (recorded by the pods reconciler), or why none
pool_demand.py      port pools' demand: takes less gives lately, and terminating pods' ports coming back
port_supply.py      port pools in Neutron: a refill's bulk request (ports or subports), pooled ports deleted
pool_recovery.py    port pools rebuilt at start from Neutron and the database
trunks.py           nested nodes: the trunk whose parent port is a node's VM NIC, looked up per node
activation.py       ports' status from the backend, reported to the pods reconciler
port_reports.py     the ports' status reported and not yet recorded: an input of the pods reconciler
endpointslices.py   EndpointSlices (or Endpoints) as the source of a load balancer's members
service_status.py   a translated Service's status (its floating IP, or a condition saying why not)
views.py            what can-reach reads of a backend
reach_store.py      can-reach's data: translation rows and the backend's views
reach_backends.py   the backends can-reach opens, by the name a translation row carries
listing_store.py    `kuberaven net get`'s data: a page of translation rows of one kind
"""
