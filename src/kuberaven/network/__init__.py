"""Network translation (network/): Namespaces, Pods and Services become networks, ports and load balancers.

translator.py  watches the cluster, decides (translate.py), drives a backend (backend.py)
backends/embedded.py   the model in kuberaven's own tables (default)
backends/openstack.py  Neutron + Octavia through openstacksdk
"""
