"""The Alembic revisions create exactly the tables the models declare; 0006 moves data both ways."""
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from store.models import Base


def test_migration_matches_models(db_engine):
    with db_engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
    assert diff == [], f"store/models.py and 0001_initial differ; update the migration: {diff}"


def test_upgrade_is_idempotent_and_creates_every_table(db_engine):
    from store import upgrade
    upgrade(db_engine)      # already at head: nothing to do, nothing fails
    tables = set(inspect(db_engine).get_table_names())
    assert set(Base.metadata.tables) <= tables
    assert "alembic_version" in tables


def _scratch_engine(pg_server, name: str):
    """An empty database of its own on the test server (the session's stays at head)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url
    admin = create_engine(make_url(pg_server.url).set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return create_engine(make_url(pg_server.url).set(database=name))


def test_0006_moves_each_assignments_toml_into_one_spec_row_and_back(pg_server):
    """Two assignments on the same text and one on another: upgrade keeps each text once (named by
    its sha256) and points the assignments at it; downgrade puts text and versions back."""
    import hashlib
    import grader
    from alembic import command
    from grader.spec import SPEC_DIR
    from sqlalchemy import text
    from store.migrate import alembic_config
    from store import specs
    from store.db import session_factory
    from store.models import Assignment
    engine = _scratch_engine(pg_server, "migration_0006")
    config = alembic_config(engine)
    command.upgrade(config, "0005_staff_tasks")
    bundled = (SPEC_DIR / "asst4-trainium2.toml").read_text()
    edited = bundled.replace('thresholds_version = "2025-11-13"', 'thresholds_version = "adopted"')
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO courses (id, name, leaderboard_visibility) VALUES (1, 'CS149', 'public')"))
        for i, (toml, tv) in enumerate(((bundled, "2025-11-13"), (bundled, "2025-11-13"), (edited, "adopted")), 1):
            conn.execute(text("INSERT INTO assignments (id, course_id, name, title, spec_name, spec_version, "
                              "thresholds_version, spec_hash, spec_toml, backend, runs_per_hour, active) VALUES "
                              "(:i, 1, :n, 't', 'asst4-trainium2', '3', :tv, 'stale', :toml, 'sim', 6, true)"),
                         {"i": i, "n": f"a{i}", "tv": tv, "toml": toml})
    command.upgrade(config, "head")
    with session_factory(engine)() as session:
        rows = session.execute(text("SELECT hash, thresholds_version FROM specs ORDER BY thresholds_version")).all()
        assert rows == [(hashlib.sha256(bundled.encode()).hexdigest(), "2025-11-13"),     # once, for two assignments
                        (hashlib.sha256(edited.encode()).hexdigest(), "adopted")]
        a1, a2, a3 = (session.get(Assignment, i) for i in (1, 2, 3))
        assert a1.spec_hash == a2.spec_hash == grader.load_spec("asst4-trainium2").spec_hash   # the file's hash
        assert specs.spec_of(a3).thresholds_version == a3.thresholds_version == "adopted"
    command.downgrade(config, "0005_staff_tasks")
    with engine.connect() as conn:
        back = conn.execute(text("SELECT id, spec_toml, thresholds_version, spec_hash FROM assignments ORDER BY id")).all()
        assert [(i, toml, tv) for i, toml, tv, _ in back] == [(1, bundled, "2025-11-13"), (2, bundled, "2025-11-13"),
                                                              (3, edited, "adopted")]
        assert back[2][3] == hashlib.sha256(edited.encode()).hexdigest()
        assert "specs" not in inspect(conn).get_table_names()
    engine.dispose()


def test_every_revision_downgrades_and_upgrades_again(pg_server):
    """Each revision's downgrade undoes its upgrade: from head down to the first revision one step
    at a time, then back up, the schema is the models' again."""
    from alembic import command
    from alembic.script import ScriptDirectory
    from store.migrate import alembic_config
    engine = _scratch_engine(pg_server, "migration_round_trip")
    config = alembic_config(engine)
    command.upgrade(config, "head")
    revisions = [r.revision for r in ScriptDirectory.from_config(config).walk_revisions()]   # head first
    for below in revisions[1:]:
        command.downgrade(config, below)
        with engine.connect() as conn:
            assert MigrationContext.configure(conn).get_current_revision() == below
    command.upgrade(config, "head")
    with engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata) == []
    engine.dispose()


def test_0007_downgrade_keeps_gradescope_runs_as_plain_submissions(pg_server):
    """A Gradescope submission (its id and time) and a token's settings are dropped by the
    downgrade; the submission itself and the token stay, and upgrading again gives them the
    defaults (no Gradescope id, the token creating no students)."""
    import datetime as dt
    from alembic import command
    from sqlalchemy import text
    from store.migrate import alembic_config
    engine = _scratch_engine(pg_server, "migration_0007")
    config = alembic_config(engine)
    command.upgrade(config, "0007_gradescope_submissions")
    created = dt.datetime(2026, 11, 13, 23, 59, tzinfo=dt.timezone.utc)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO courses (id, name, leaderboard_visibility) VALUES (1, 'CS149', 'public')"))
        conn.execute(text("INSERT INTO users (id, email, name, role, active) VALUES (1, 's@example.edu', '', 'user', true)"))
        conn.execute(text("INSERT INTO specs (hash, spec_version, thresholds_version, toml) VALUES ('h', '3', 'v', 'x')"))
        conn.execute(text("INSERT INTO assignments (id, course_id, name, title, spec_name, spec_hash, backend, "
                          "runs_per_hour, active) VALUES (1, 1, 'a1', 't', 'asst4-trainium2', 'h', 'sim', 6, true)"))
        conn.execute(text("INSERT INTO submissions (id, user_id, assignment_id, filename, data, sha256, size, "
                          "uploaded_at, gradescope_submission_id, gradescope_created_at) VALUES (1, 1, 1, "
                          "'conv2d.py', 'x', 'abc', 1, now(), 'gs-77', :c)"), {"c": created})
        conn.execute(text("INSERT INTO course_submit_tokens (id, course_id, token_hash, label, creates_students, "
                          "runs_per_hour) VALUES (1, 1, 'th', 'gs', true, 50)"))
    command.downgrade(config, "0006_specs")
    with engine.connect() as conn:
        columns = {c["name"] for c in inspect(conn).get_columns("submissions")}
        assert "gradescope_submission_id" not in columns and "gradescope_created_at" not in columns
        assert conn.execute(text("SELECT id, filename FROM submissions")).all() == [(1, "conv2d.py")]
        assert conn.execute(text("SELECT id, label FROM course_submit_tokens")).all() == [(1, "gs")]
    command.upgrade(config, "0007_gradescope_submissions")
    with engine.connect() as conn:
        assert conn.execute(text("SELECT gradescope_submission_id FROM submissions")).all() == [(None,)]
        assert conn.execute(text("SELECT creates_students, runs_per_hour FROM course_submit_tokens")).all() == \
            [(False, 600)]
    engine.dispose()


def test_0009_keeps_todays_assignments_graded_not_counted_and_downgrades(pg_server):
    """An assignment made before the late policy gets the default rule (graded, not counted) and
    no factors; its course no late days; downgrade takes the columns and their check away."""
    from alembic import command
    from sqlalchemy import text
    from store.migrate import alembic_config
    engine = _scratch_engine(pg_server, "migration_0009")
    config = alembic_config(engine)
    command.upgrade(config, "0008_contests")
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO courses (id, name, leaderboard_visibility) VALUES (1, 'CS149', 'public')"))
        conn.execute(text("INSERT INTO specs (hash, spec_version, thresholds_version, toml) VALUES ('h', '1', 't', '')"))
        conn.execute(text("INSERT INTO assignments (id, course_id, name, title, spec_name, spec_hash, backend, "
                          "runs_per_hour, active) VALUES (1, 1, 'a1', 't', 's', 'h', 'sim', 6, true)"))
    command.upgrade(config, "0009_late_policy")
    with engine.begin() as conn:
        assert conn.execute(text("SELECT late_rule, late_factors FROM assignments")).one() == ("graded-not-counted", [])
        assert conn.execute(text("SELECT late_days FROM courses")).scalar_one() == 0
        import pytest
        from sqlalchemy.exc import IntegrityError
        with pytest.raises(IntegrityError):
            with conn.begin_nested():
                conn.execute(text("UPDATE assignments SET late_rule = 'sometimes'"))
    command.downgrade(config, "0008_contests")
    columns = {c["name"] for c in inspect(engine).get_columns("assignments")}
    assert not {"late_rule", "late_factors"} & columns
    assert "late_days" not in {c["name"] for c in inspect(engine).get_columns("courses")}
    engine.dispose()
