"""`grader backup` / `grader restore` and `grader migrate` on real embedded PostgreSQL instances
(issue 46): an instance with a user, a submission and two runs is backed up into one file, written
whole or not at all, and restored into a new instance folder, where the store holds the same
people and runs (the one being graded queued again) and the same secret key; a restore refuses an
instance that has data unless --force, and a served one whatever it is told; `grader migrate`
refuses an instance that does not exist instead of making one. The commands run as an operator
runs them, as processes."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from worker_helpers import OPTIMIZED, ROOT, TINY_SPEC

KEY = "0123456789abcdef" * 4


class Place:
    """A folder of the test's own (not pytest's tmp_path, which the embedded PostgreSQL's own user
    cannot traverse when the tests run as root), and the environment of an operator's shell."""

    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="nki-test-backup-")).resolve()
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("DATABASE_URL", "REDIS_URL", "NKI_GRADER_HOME", "NKI_GRADER_SECRET_KEY")}
        self.env["XDG_CONFIG_HOME"] = str(self.tmp / "config")

    def grader(self, *args: str, home: Path | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
        env = dict(self.env, **({"NKI_GRADER_HOME": str(home)} if home else {}))
        return subprocess.run([sys.executable, "-m", "service.cli", *args], cwd=cwd or ROOT, env=env,
                              capture_output=True, text=True, timeout=300)


@pytest.fixture
def place():
    made = Place()
    yield made
    from service.supervision import stop_instance_processes
    for folder in made.tmp.iterdir():       # a failed test leaves no server running either
        if (folder / "pgdata").is_dir():
            stop_instance_processes(folder, parts_grace_s=1.0)
    shutil.rmtree(made.tmp, ignore_errors=True)


class Opened:
    """An instance's embedded database opened in this process for the test to read or write."""

    def __init__(self, folder: Path) -> None:
        from store.db import EmbeddedPostgres, engine_from_env
        self.pg = EmbeddedPostgres(folder / "pgdata")
        self.engine = engine_from_env(self.pg.url)

    def __enter__(self):
        from store.db import session_factory
        self.session = session_factory(self.engine)()
        return self.session

    def __exit__(self, *_):
        self.session.close()
        self.pg.stop()


def make_instance(folder: Path) -> dict:
    """An instance as `grader serve` leaves one: its database with a course, an assignment, a
    student's submission with one run graded to the end of a claim (running) and one queued; its
    secret key; its lock file (it was served)."""
    from store import lifecycle, specs, upgrade
    from store.instance import InstanceLock
    from store.models import Course, Submission, User
    folder.mkdir(parents=True)
    InstanceLock.acquire(folder).release()
    (folder / "secret_key").write_text(KEY)
    opened = Opened(folder)
    upgrade(opened.engine)
    with opened as s:
        assignment = specs.new_assignment(s, str(TINY_SPEC), course=Course(name="CS149"), name="tiny", backend="sim")
        student = User(email="ada@example.edu", name="Ada", nickname="ada")
        submission = Submission(user=student, assignment=assignment, filename="conv2d.py", data=OPTIMIZED,
                                sha256="a" * 64, size=len(OPTIMIZED))
        grading, waiting = lifecycle.new_run(submission, "sim", "task-1"), lifecycle.new_run(submission, "sim", "task-2")
        from store.models import WorkerHeartbeat
        s.add_all([grading, waiting, WorkerHeartbeat(name="w1@old-machine", queues="sim", pid=1)])   # alive
        s.commit()
        assert lifecycle.claim(s, grading.id, "w1@old-machine:1", "task-1", stale_after_s=90) is not None
        return {"grading": grading.id, "waiting": waiting.id}


def test_a_backup_restored_into_a_new_instance_has_its_people_runs_and_key(place):
    from sqlalchemy import select
    from store.models import GradingRun, User
    source = place.tmp / "source"
    runs = make_instance(source)
    backups = place.tmp / "backups"
    backups.mkdir()

    made = place.grader("backup", str(backups), home=source)
    assert made.returncode == 0, made.stderr
    files = list(backups.iterdir())
    assert len(files) == 1 and files[0].name.startswith("nki-grader-") and files[0].suffix == ".tar", files
    backup = files[0]
    assert "1 user," in made.stdout and "2 runs" in made.stdout and "and its secret key" in made.stdout, made.stdout
    assert f"backing up the instance at {source}" in made.stderr
    assert oct(backup.stat().st_mode & 0o777) == "0o600"        # password hashes and the key
    again = place.grader("backup", str(backup), home=source)
    assert again.returncode == 2 and "already exists" in again.stderr
    assert list(backups.iterdir()) == [backup]                   # nothing half-written left beside it

    target = place.tmp / "restored"
    restored = place.grader("restore", str(backup), "--instance", str(target))
    assert restored.returncode == 0, restored.stderr
    assert f"into the instance at {target}" in restored.stdout and "1 user," in restored.stdout
    assert f"run {runs['grading']} was being graded" in restored.stdout
    assert f"NKI_GRADER_HOME={target} grader serve" in restored.stdout
    assert (target / "secret_key").read_text() == KEY
    with Opened(target) as s:
        student = s.scalar(select(User).where(User.email == "ada@example.edu"))
        assert student is not None and student.nickname == "ada"
        by_id = {r.id: r for r in s.scalars(select(GradingRun))}
        assert set(by_id) == {runs["grading"], runs["waiting"]}
        assert all(r.submission.user_id == student.id and r.submission.data == OPTIMIZED for r in by_id.values())
        assert by_id[runs["waiting"]].status == "queued"
        grading = by_id[runs["grading"]]
        assert grading.status == "queued" and grading.worker is None          # its worker was the old instance's
        # nor is that worker counted alive here (`grader queue`, the site's no-worker warning)
        from store.models import WorkerHeartbeat
        assert s.scalars(select(WorkerHeartbeat.name)).all() == []
        assert by_id[runs["grading"]].submission.assignment.spec_row is not None     # the spec came too

    # a second restore into the same folder: refused, it holds an instance now
    refused = place.grader("restore", str(backup), "--instance", str(target))
    assert refused.returncode == 2 and "already holds an nki-grader instance" in refused.stderr
    assert "--force" in refused.stderr

    # while a serve holds it: refused even with --force (the lock, as `grader serve` holds it)
    from store.instance import InstanceLock
    lock = InstanceLock.acquire(target)
    lock.set_state("serving", "http://127.0.0.1:8123")
    try:
        served = place.grader("restore", str(backup), "--instance", str(target), "--force")
    finally:
        lock.release()
    assert served.returncode == 2 and "is being served" in served.stderr and "http://127.0.0.1:8123" in served.stderr

    with Opened(target) as s:             # a change the forced restore must undo
        s.add(User(email="late@example.edu"))
        s.commit()
    forced = place.grader("restore", str(backup), "--instance", str(target), "--force")
    assert forced.returncode == 0, forced.stderr
    assert "replacing its data" in forced.stdout
    with Opened(target) as s:
        assert sorted(s.scalars(select(User.email))) == ["ada@example.edu"]


def test_a_deployment_backs_up_and_restores_through_database_url(place):
    """As under Docker Compose: no instance folder database, DATABASE_URL names the server (here a
    PostgreSQL of the test's own); the backup's key goes to NKI_GRADER_HOME's folder."""
    from sqlalchemy import select
    from store.db import EmbeddedPostgres, engine_from_env, session_factory
    from store.models import GradingRun, User
    source = place.tmp / "source"
    make_instance(source)
    backup = place.tmp / "b.tar"
    assert place.grader("backup", str(backup), home=source).returncode == 0
    server = EmbeddedPostgres(place.tmp / "server" / "pgdata")
    try:
        data = place.tmp / "data"
        place.env.update(DATABASE_URL=server.url, NKI_GRADER_HOME=str(data))
        out = place.grader("restore", str(backup))
        assert out.returncode == 0, out.stderr
        assert "into postgresql+psycopg://" in out.stdout and "NKI_GRADER_HOME=" not in out.stdout
        assert (data / "secret_key").read_text() == KEY
        session = session_factory(engine_from_env(server.url))()
        assert session.scalars(select(User.email)).all() == ["ada@example.edu"]
        assert {r.status for r in session.scalars(select(GradingRun))} == {"queued"}
        session.add(User(email="late@example.edu"))
        session.commit()
        session.close()
        refused = place.grader("restore", str(backup))
        assert refused.returncode == 2 and "already holds an nki-grader instance" in refused.stderr
        assert place.grader("restore", str(backup), "--force").returncode == 0
        session = session_factory(engine_from_env(server.url))()
        assert session.scalars(select(User.email)).all() == ["ada@example.edu"]
        session.close()
        again = place.tmp / "again.tar"
        out = place.grader("backup", str(again))
        assert out.returncode == 0 and "1 user," in out.stdout and "and its secret key" in out.stdout, out.stderr
        assert "backing up the service whose database is" in out.stderr and "DATABASE_URL" in out.stderr
        # as in a Compose container: the key in the environment, no XDG_RUNTIME_DIR. The file
        # holds no key, says so, and the way back is into a database, not a folder
        place.env.pop("XDG_RUNTIME_DIR", None)
        place.env["NKI_GRADER_SECRET_KEY"] = KEY
        composed = place.grader("backup", str(place.tmp / "composed.tar"))
        assert composed.returncode == 0, composed.stderr
        assert "but not the secret key" in composed.stdout and "the key" not in composed.stdout.split("It holds")[1]
        assert "with DATABASE_URL naming an empty database" in composed.stdout and "--instance" not in composed.stdout
        assert "Warning" not in composed.stderr, composed.stderr          # nothing but what it did
    finally:
        server.stop()


def test_restore_refuses_what_is_not_a_whole_backup(place):
    source = place.tmp / "source"
    make_instance(source)
    backup = place.tmp / "b.tar"
    assert place.grader("backup", str(backup), home=source).returncode == 0
    cut = place.tmp / "cut.tar"
    cut.write_bytes(backup.read_bytes()[:backup.stat().st_size // 2])
    target = place.tmp / "never"
    out = place.grader("restore", str(cut), "--instance", str(target))
    assert out.returncode == 2 and "nothing restored" in out.stderr and "backup" in out.stderr, out.stderr
    assert not target.exists()
    other = place.tmp / "other.tar"
    with __import__("tarfile").open(other, "w") as tar:
        tar.add(TINY_SPEC, "spec.toml")
    out = place.grader("restore", str(other), "--instance", str(target))
    assert out.returncode == 2 and "is not an nki-grader backup" in out.stderr
    assert not target.exists()


def test_migrate_refuses_an_instance_that_does_not_exist(place):
    nothing = place.tmp / "nothing"
    out = place.grader("migrate", home=nothing)
    assert out.returncode == 2 and "nothing to migrate" in out.stderr and "holds no nki-grader database" in out.stderr
    assert not nothing.exists()                                  # no 47 MB database made there
    empty = place.tmp / "empty"
    empty.mkdir()
    out = place.grader("migrate", cwd=empty)                     # no NKI_GRADER_HOME, nothing recorded, no ./instance
    assert out.returncode == 2 and "no nki-grader service found" in out.stderr
    assert list(empty.iterdir()) == []

    source = place.tmp / "source"
    make_instance(source)
    out = place.grader("migrate", home=source)
    assert out.returncode == 0 and "database schema is current" in out.stdout, out.stderr
    assert f"migrating the instance at {source}" in out.stderr
    from store.instance import InstanceLock
    lock = InstanceLock.acquire(source)
    lock.set_state("serving", "http://127.0.0.1:8124")
    try:
        out = place.grader("migrate", home=source)
    finally:
        lock.release()
    assert out.returncode == 2 and "is serving" in out.stderr and "stop it" in out.stderr


def test_migrate_says_which_revision_it_brought_the_schema_from_and_to(place):
    """The upgrade's step 4: `grader migrate` on an instance one release behind names the
    revisions (so the operator sees the migration ran), and run again, that nothing was left to do."""
    from alembic.script import ScriptDirectory
    from store import upgrade
    from store.instance import InstanceLock
    from store.migrate import alembic_config
    folder = place.tmp / "older"
    folder.mkdir()
    InstanceLock.acquire(folder).release()
    opened = Opened(folder)
    head = ScriptDirectory.from_config(alembic_config(opened.engine)).get_revision("head")
    upgrade(opened.engine, head.down_revision)
    opened.pg.stop()
    out = place.grader("migrate", home=folder)
    assert out.returncode == 0, out.stderr
    assert f"database schema is current: {head.revision} (migrated from {head.down_revision})" in out.stdout
    again = place.grader("migrate", home=folder)
    assert again.returncode == 0 and f"current: {head.revision} (it was already)" in again.stdout, again.stdout


def test_course_token_finds_the_running_service_and_never_makes_an_instance(place):
    """Run from the wrong folder, `grader course-token` used to make an empty instance there (and
    answer "no course named ..., have: none yet"); it now looks for the running service as
    `grader admin-link` does, and says there is none."""
    empty = place.tmp / "elsewhere"
    empty.mkdir()
    out = place.grader("course-token", "create", "--course", "CS149", cwd=empty)   # list, set, revoke: the same call
    assert out.returncode == 2 and "no nki-grader service found" in out.stderr, out.stderr
    assert list(empty.iterdir()) == []
    stopped = place.tmp / "stopped"
    make_instance(stopped)
    out = place.grader("course-token", "create", "--course", "CS149", home=stopped)
    assert out.returncode == 2 and "nkic_" not in out.stdout, out.stdout
