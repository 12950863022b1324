"""Process runtime (runtime/): what keeps `kuberaven run` alive and divides the work among replicas.

    supervisor.py  restarts components with backoff, gives up on those that keep failing
    health.py      each component's status, which /readyz reports
    leader.py      leader election on a Kubernetes Lease
    ownership.py   which replica owns which cluster (pure), replicas.py who the replicas are
    clusters.py    one set of components per cluster this replica owns

Nothing here knows of informers or queues (watch/).
"""
