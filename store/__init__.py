"""Persistent state shared by the web site and the workers: SQLAlchemy models, the database
engine (embedded PostgreSQL by default) and Alembic migrations."""
from .db import engine_from_env, session_scope, database_url, start_embedded, instance_dir  # noqa: F401
from .migrate import upgrade  # noqa: F401
