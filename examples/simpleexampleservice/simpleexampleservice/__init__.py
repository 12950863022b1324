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
"""

from pathlib import Path

from .models import SimpleExampleServiceInstance
from .policies import SimpleExampleServiceInstancePolicy
from .watchers import POD_PHASE_WATCHER

MODELS = [SimpleExampleServiceInstance]
MIGRATIONS = Path(__file__).parent / "migrations"
POLICIES = [SimpleExampleServiceInstancePolicy()]
WATCHERS = [POD_PHASE_WATCHER]
