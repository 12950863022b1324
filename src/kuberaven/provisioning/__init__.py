"""Provisioning (provisioning/): model rows → Kubernetes objects, kept in step, removed safely.

model/ rows (dirty: enacted < updated)  ─► loop.SyncLoop ─► steps: objects, pods, resources ─► API server
model/tombstones (deleted managed rows) ─┘                  (server-side apply, field manager "kuberaven")
policies.PolicyRunner: plugins' model policies, run after a row's transaction commits
"""

from .loop import SyncLoop, SyncOptions, default_steps

__all__ = ["SyncLoop", "SyncOptions", "default_steps"]
