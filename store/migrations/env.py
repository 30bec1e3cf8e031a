"""Alembic environment: the engine comes from store.migrate (or DATABASE_URL / the embedded
server when run as `alembic -c store/alembic.ini`)."""
from alembic import context

from store.db import engine_from_env
from store.models import Base

engine = context.config.attributes.get("engine") or engine_from_env()

with engine.connect() as connection:
    context.configure(connection=connection, target_metadata=Base.metadata, compare_type=True)
    with context.begin_transaction():
        context.run_migrations()
    connection.commit()
