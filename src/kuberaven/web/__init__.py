"""REST API and web UI (web/): how people and programs look at the model and change it.

HTTP ─► app.py (auth, errors, /healthz /readyz /metrics)
     ─► api.py     /api/v1/<kind> CRUD ─► model/documents.py (the path of `apply -f` and Python)
     ─► feeds.py   /api/v1/events (+ SSE stream) ◄─ outbox; /api/v1/network/translations ◄─ translation tables
     ─► network.py /api/v1/network/{networks,ports,loadbalancers,policies,can-reach} ◄─ listing_store, reach_store
     ─► ui.py      / (the page: inventory, network and health tabs) + static/, which only calls the API above
     ─► docs.py    /docs: Swagger UI from a Python package's files (no CDN)
"""
