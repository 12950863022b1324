"""``python -m kuberaven`` is the ``kuberaven`` command."""

from .cli import main

main()
