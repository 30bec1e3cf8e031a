"""The `slow` marker: `pytest -m "not slow"` is the fast subset (docs/contributors.md gives its
time). Slow tests are listed here by node id prefix rather than decorated one by one, so the
list is the one place to look (tests/test_docs.py checks each prefix still names a test)."""
from __future__ import annotations

import pytest

# Measured with --durations on a 2-core machine: each takes tens of seconds or more.
SLOW = (
    "tests/web/test_browser.py",                # Chromium against a whole `grader serve`
    "tests/web/test_browser_report.py",         # Chromium and a Celery worker, four grades
    "tests/workers/",                           # real Celery workers, the nightly regression, serve
)


def is_slow(nodeid: str) -> bool:
    return nodeid.startswith(SLOW)


@pytest.hookimpl(tryfirst=True)                 # before `-m` deselects by marker
def pytest_collection_modifyitems(session, config, items):
    for item in items:
        if is_slow(item.nodeid):
            item.add_marker(pytest.mark.slow)
