"""Former home of the shared engine helpers, now ``tests.helpers``: a re-export kept only
for tests/actions/, which imports from here until its pending merge lands."""

from tests.helpers import endless_server, rss_bytes

__all__ = ["endless_server", "rss_bytes"]
