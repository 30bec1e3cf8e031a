"""`grader admin-link` (issue 46): the first admin's one-time sign-in link for a deployment that
`grader serve` does not run (Docker Compose runs gunicorn), against DATABASE_URL as compose's
containers have it; the admin is made on first use, and each new link revokes the one before."""
from __future__ import annotations

import os
import re
import subprocess
import sys

from worker_helpers import ROOT


def _grader(*args, **env):
    return subprocess.run([sys.executable, "-m", "service.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=300)


def test_admin_link_makes_the_first_admin_and_a_link_at_the_sites_address(db):
    from sqlalchemy import select
    from store.models import LoginToken, User
    out = _grader("admin-link", "--url", "https://grader.example.edu", NKI_GRADER_ADMIN_EMAIL="Staff@Example.edu")
    assert out.returncode == 0, out.stderr
    assert "talking to the service whose database is" in out.stderr
    link = re.search(r"(https://grader\.example\.edu/login/link/[\w-]+)", out.stdout)
    assert link and "valid 24 hours" in out.stdout, out.stdout
    admin = db.scalar(select(User).where(User.email == "staff@example.edu"))
    assert admin is not None and admin.role == "admin" and admin.active
    second = _grader("admin-link", NKI_GRADER_URL="https://other.example.edu")
    assert second.returncode == 0 and "https://other.example.edu/login/link/" in second.stdout
    db.expire_all()
    tokens = db.scalars(select(LoginToken).where(LoginToken.user_id == admin.id).order_by(LoginToken.id)).all()
    assert len(tokens) == 2 and tokens[0].revoked_at is not None and tokens[1].revoked_at is None
    assert db.scalars(select(User).where(User.role == "admin")).all() == [admin]      # the same admin again


def test_admin_link_refuses_an_address_without_its_scheme(db):
    out = _grader("admin-link", "--url", "grader.example.edu")
    assert out.returncode == 2 and "with its scheme" in out.stderr and "login/link" not in out.stdout
