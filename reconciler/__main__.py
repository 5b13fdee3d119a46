"""``python -m reconciler`` runs the ``monitors`` command line."""

from reconciler.cli import start

if __name__ == "__main__":
    start.entry()
