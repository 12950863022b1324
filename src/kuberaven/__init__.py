"""kuberaven: Kubernetes ⇄ SQL data model ⇄ Kafka, and the Kuryr-like network translation.

Importing the package makes plugins.py set model/'s plugin loader, so that
the Python API (``kuberaven.model.connect()``) knows the configured plugins'
models and migrations without model/ importing the layer above it.
"""

from . import plugins as plugins
