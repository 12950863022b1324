"""Watch machinery (watch/): shared informers and their slim stores, the queues, reconcilers and the engine.

    kube/reflector.py (list+watch) ──► informers.py: one informer per cluster and resource, fanned out;
        store.py: slim stores, listers and indices over the declared fields
    ──► engine.py: per consumer, events in order (queue.py, watcher.py, batcher.py) or keys to reconcile
        (workqueue.py, controller.py, reconciler.py), each consumer's watch position (positions.py, feeds.py)

Nothing here knows of processes, leases or replicas (runtime/), nor of what
the consumers do with what they watch.
"""
