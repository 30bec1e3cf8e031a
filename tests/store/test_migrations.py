"""The single Alembic revision creates exactly the tables the models declare."""
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
