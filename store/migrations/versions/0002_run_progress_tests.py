"""Each running grade's finished tests, stored as they finish (the run page and `grader submit`
show them before the report exists); each assignment's standings stamp (the leaderboard is
recomputed when a write moved it).

Revision ID: 0002_run_progress_tests
Revises: 0001_initial
"""
from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0002_run_progress_tests'
down_revision = '0001_initial'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('grading_runs', sa.Column('progress_tests', postgresql.JSONB(astext_type=sa.Text()),
                                            server_default=sa.text("'[]'::jsonb"), nullable=False))
    op.add_column('assignments', sa.Column('standings_changed_at', sa.DateTime(timezone=True),
                                           server_default=sa.text('now()'), nullable=False))


def downgrade() -> None:
    op.drop_column('assignments', 'standings_changed_at')
    op.drop_column('grading_runs', 'progress_tests')
