"""kuberaven: Kubernetes ⇄ SQL data model ⇄ Kafka, and the Kuryr-like network translation.

Importing the package makes plugins.py set model/'s plugin loader, so that
the Python API (``kuberaven.model.connect()``) knows the configured plugins'
models and migrations without model/ importing the layer above it. That costs
nothing: plugins.py and model/'s package import no library at module level
(tests/unit/test_startup.py checks it), so each command loads only what it uses.
"""

from . import plugins as plugins
