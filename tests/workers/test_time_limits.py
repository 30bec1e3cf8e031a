"""The worker's time settings must nest: a grade's broker message outlives the task time limit
(else Redis hands a running grade to a second worker), and a problem check's limit ends before the
task limit (else the process is killed where the check would have failed saying why). A setting
that breaks either is refused when the Celery app is configured, naming both settings."""
from __future__ import annotations

import pytest
from celery import Celery

from workers.app import _configure


@pytest.mark.parametrize("env, said", [
    ({"NKI_VISIBILITY_TIMEOUT_S": "3600", "NKI_TASK_TIME_LIMIT_S": "7200"},
     "NKI_VISIBILITY_TIMEOUT_S (3600) must exceed NKI_TASK_TIME_LIMIT_S (7200)"),
    ({"NKI_PROBLEM_CHECK_LIMIT_S": "7200", "NKI_TASK_TIME_LIMIT_S": "7200"},
     "NKI_PROBLEM_CHECK_LIMIT_S (7200) must be under NKI_TASK_TIME_LIMIT_S (7200)"),
])
def test_time_settings_that_do_not_nest_are_refused(monkeypatch, env, said):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=said.replace("(", r"\(").replace(")", r"\)")):
        _configure(Celery("nesting-check"))


def test_the_defaults_nest(monkeypatch):
    for name in ("NKI_VISIBILITY_TIMEOUT_S", "NKI_TASK_TIME_LIMIT_S", "NKI_PROBLEM_CHECK_LIMIT_S"):
        monkeypatch.delenv(name, raising=False)
    app = Celery("defaults")
    _configure(app)
    assert app.conf.task_time_limit == 7200
