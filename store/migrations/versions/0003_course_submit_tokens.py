"""Course submit tokens: an outside system (a Gradescope autograder) submits for any student
of one course (store/models.py CourseSubmitToken).

Revision ID: 0003_course_submit_tokens
Revises: 0002_run_progress_tests
"""
from alembic import op
import sqlalchemy as sa

revision = '0003_course_submit_tokens'
down_revision = '0002_run_progress_tests'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('course_submit_tokens',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('course_id', sa.Integer(), nullable=False),
    sa.Column('token_hash', sa.String(length=128), nullable=False),
    sa.Column('label', sa.String(length=100), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('last_used_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['course_id'], ['courses.id'], name=op.f('fk_course_submit_tokens_course_id_courses'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_course_submit_tokens')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_course_submit_tokens_token_hash'))
    )
    op.create_index(op.f('ix_course_submit_tokens_course_id'), 'course_submit_tokens', ['course_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_course_submit_tokens_course_id'), table_name='course_submit_tokens')
    op.drop_table('course_submit_tokens')
