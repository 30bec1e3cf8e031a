"""The `slow` marker: `pytest -m "not slow"` is the fast subset (docs/contributors.md gives its
time). Slow tests are listed here by node id prefix rather than decorated one by one, so the
list is the one place to look (tests/test_docs.py checks each prefix still names a test)."""
from __future__ import annotations

import pytest

# Measured with --durations on a 2-core machine: each takes ten seconds or more (a module when its
# shared fixture is the slow part: installing an autograder, grading a whole reference).
SLOW = (
    "tests/web/test_browser.py",                # Chromium against a whole `grader serve`
    "tests/web/test_browser_report.py",         # Chromium and a Celery worker, four grades
    "tests/web/test_nightly_against_hardware.py",   # a nightly of both references, then Chromium
    "tests/web/test_run_against_hardware.py",   # the SDK doubles' environments and a grade on them
    "tests/workers/",                           # real Celery workers, the nightly regression, serve
    "tests/grader/test_gradescope_local.py",    # setup.sh installs the grader in a fresh venv
    "tests/grader/test_gradescope_isolation.py",
    "tests/grader/test_gradescope_service.py",
    "tests/grader/test_grade.py::test_optimized_reference_scores_full_marks",     # full asst4 grades
    "tests/grader/test_grade.py::test_relaxed_reference_tiers_where_the_model_says",
    "tests/grader/test_dialect_grades.py::test_the_nki06_optimized_reference_",     # full NKI 0.6 grades
    "tests/grader/test_dialect_grades.py::test_the_nki06_relaxed_reference_tiers_as_the_legacy_one",
    "tests/grader/test_redteam_program.py::"
    "test_an_honest_kernel_of_a_hundred_thousand_instructions_grades_without_a_flag",
    "tests/grader/test_fast_feedback.py::"
    "test_a_wrong_shape_grade_of_the_full_assignment_runs_one_configuration_per_test",
    "tests/reference_kernels/test_reference_kernels.py::test_conv2d_large_images",
    "tests/nkisim/test_cost.py::test_twenty_thousand_tiny_writes_to_one_tile_cost_linear_work",
)


def is_slow(nodeid: str) -> bool:
    return nodeid.startswith(SLOW)


@pytest.hookimpl(tryfirst=True)                 # before `-m` deselects by marker
def pytest_collection_modifyitems(session, config, items):
    for item in items:
        if is_slow(item.nodeid):
            item.add_marker(pytest.mark.slow)
