"""Alembic, driven from code: `store.upgrade()` brings a database to the current schema."""
from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Engine

from .db import engine_from_env

HERE = Path(__file__).resolve().parent


def alembic_config(engine: Engine) -> Config:
    config = Config()
    config.set_main_option("script_location", str(HERE / "migrations"))
    config.attributes["engine"] = engine
    return config


def upgrade(engine: Engine | None = None, revision: str = "head") -> None:
    engine = engine or engine_from_env()
    command.upgrade(alembic_config(engine), revision)
