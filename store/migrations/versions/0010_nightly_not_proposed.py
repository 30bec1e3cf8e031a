"""The nightly's relaxed thresholds it refuses to propose: on a relaxed reference's result, per
test, why (its p99 within grader.vocabulary.RELAXED_MIN_GAP of the optimized reference's;
workers/nightly.py note_relaxed_gaps).

Revision ID: 0010_nightly_not_proposed
Revises: 0009_late_policy
"""
from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0010_nightly_not_proposed'
down_revision = '0009_late_policy'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('nightly_results', sa.Column('not_proposed', postgresql.JSONB(astext_type=sa.Text()),
                                               server_default=sa.text("'{}'::jsonb"), nullable=False))


def downgrade() -> None:
    op.drop_column('nightly_results', 'not_proposed')
