"""Gradescope service mode: a submission keeps Gradescope's submission id and time (the deadline
is held to that time, and a regrade of the same Gradescope submission grades the same row
again); a course token says whether it may create students and how many runs an hour it starts
(store/models.py Submission, CourseSubmitToken).

Revision ID: 0007_gradescope_submissions
Revises: 0006_specs
"""
from alembic import op
import sqlalchemy as sa

revision = '0007_gradescope_submissions'
down_revision = '0006_specs'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('submissions', sa.Column('gradescope_submission_id', sa.String(length=64), nullable=True))
    op.add_column('submissions', sa.Column('gradescope_created_at', sa.DateTime(timezone=True), nullable=True))
    op.create_unique_constraint('uq_submissions_assignment_gradescope', 'submissions',
                                ['assignment_id', 'gradescope_submission_id'])
    op.add_column('course_submit_tokens', sa.Column('creates_students', sa.Boolean(),
                                                    server_default=sa.text('false'), nullable=False))
    op.add_column('course_submit_tokens', sa.Column('runs_per_hour', sa.Integer(),
                                                    server_default=sa.text('600'), nullable=False))


def downgrade() -> None:
    op.drop_column('course_submit_tokens', 'runs_per_hour')
    op.drop_column('course_submit_tokens', 'creates_students')
    op.drop_constraint('uq_submissions_assignment_gradescope', 'submissions', type_='unique')
    op.drop_column('submissions', 'gradescope_created_at')
    op.drop_column('submissions', 'gradescope_submission_id')
