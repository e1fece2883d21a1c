"""``python -m exporter``: same as the ``sglang-exporter`` command."""

from .cli import run

run()
