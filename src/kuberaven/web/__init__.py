"""REST API and web UI (web/): how people and programs look at the model and change it.

HTTP ─► app.py (auth, errors, /healthz /readyz /metrics)
     ─► api.py     /api/v1/<kind> CRUD ─► model/documents.py (the path of `apply -f` and Python)
     ─► feeds.py   /api/v1/events (+ SSE stream) ◄─ outbox; /api/v1/network/* ◄─ translation tables
     ─► ui.py      / (the page) + static/, which only calls the API above
"""
