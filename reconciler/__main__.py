"""``python -m reconciler`` runs the ``monitors`` command line."""

from reconciler.cli import main

if __name__ == "__main__":
    main.entry()
