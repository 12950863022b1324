"""SimpleExampleService, as a kuberaven plugin (modelled on the XOS service of that name).

A ``SimpleExampleServiceInstance`` row holds a message. Its model policy
creates, in the instance's trust domain, a ConfigMap holding the message as
``index.html`` and a KubernetesServiceInstance (an httpd pod) that mounts it
where httpd serves from; changing the message changes the ConfigMap; deleting
the row deletes both. kuberaven's sync loop does the Kubernetes side.

    kind: SimpleExampleServiceInstance
    name: hello
    trust_domain: kubernetes/demo
    message: Hello, world

``POLICIES`` and ``WATCHERS`` are imported when the daemon first asks for
them (PEP 562): they load kuberaven's provisioning loop and watch machinery,
which a command such as `kuberaven get` does not need.
"""

from pathlib import Path
from typing import Any

from .models import SimpleExampleServiceInstance

MODELS = [SimpleExampleServiceInstance]
MIGRATIONS = Path(__file__).parent / "migrations"


def __getattr__(name: str) -> Any:
    if name == "POLICIES":
        from .policies import SimpleExampleServiceInstancePolicy

        value: list[Any] = [SimpleExampleServiceInstancePolicy()]
    elif name == "WATCHERS":
        from .watchers import POD_PHASE_WATCHER

        value = [POD_PHASE_WATCHER]
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # one list of the same objects for every caller
    return value
