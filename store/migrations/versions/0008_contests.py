"""Contest mode: an assignment is a course assignment or a contest (ranked by the geometric mean
of its benchmark p99s, code revealed when it ends), with the contest's end; a grading run may be
disqualified by staff, with the reason, who and when (store/models.py Assignment, GradingRun;
web/contest.py).

Revision ID: 0008_contests
Revises: 0007_gradescope_submissions
"""
from alembic import op
import sqlalchemy as sa

revision = '0008_contests'
down_revision = '0007_gradescope_submissions'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('assignments', sa.Column('mode', sa.String(length=16), server_default=sa.text("'course'"),
                                           nullable=False))
    op.create_check_constraint(op.f('ck_assignments_mode_valid'), 'assignments', "mode IN ('course', 'contest')")
    op.add_column('assignments', sa.Column('contest_ends_at', sa.DateTime(timezone=True), nullable=True))
    op.add_column('grading_runs', sa.Column('disqualified_reason', sa.Text(), nullable=True))
    op.add_column('grading_runs', sa.Column('disqualified_by_id', sa.Integer(), nullable=True))
    op.create_foreign_key('fk_grading_runs_disqualified_by_id_users', 'grading_runs', 'users',
                          ['disqualified_by_id'], ['id'], ondelete='SET NULL')
    op.add_column('grading_runs', sa.Column('disqualified_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column('grading_runs', 'disqualified_at')
    op.drop_constraint('fk_grading_runs_disqualified_by_id_users', 'grading_runs', type_='foreignkey')
    op.drop_column('grading_runs', 'disqualified_by_id')
    op.drop_column('grading_runs', 'disqualified_reason')
    op.drop_column('assignments', 'contest_ends_at')
    op.drop_constraint(op.f('ck_assignments_mode_valid'), 'assignments', type_='check')
    op.drop_column('assignments', 'mode')
