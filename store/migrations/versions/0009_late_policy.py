"""Late policy: an assignment's late rule (none, graded-not-counted (the default), credit-steps
with per-day factors, late-days) and a course's budget of late days per student
(store/models.py Assignment.late_rule/late_factors, Course.late_days; store/runs.py counts by them).

Revision ID: 0009_late_policy
Revises: 0008_contests
"""
from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0009_late_policy'
down_revision = '0008_contests'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('assignments', sa.Column('late_rule', sa.String(length=24),
                                           server_default=sa.text("'graded-not-counted'"), nullable=False))
    op.create_check_constraint(op.f('ck_assignments_late_rule_valid'), 'assignments',
                               "late_rule IN ('none', 'graded-not-counted', 'credit-steps', 'late-days')")
    op.add_column('assignments', sa.Column('late_factors', postgresql.JSONB(astext_type=sa.Text()),
                                           server_default=sa.text("'[]'::jsonb"), nullable=False))
    op.add_column('courses', sa.Column('late_days', sa.Integer(), server_default=sa.text('0'), nullable=False))


def downgrade() -> None:
    op.drop_column('courses', 'late_days')
    op.drop_column('assignments', 'late_factors')
    op.drop_constraint(op.f('ck_assignments_late_rule_valid'), 'assignments', type_='check')
    op.drop_column('assignments', 'late_rule')
