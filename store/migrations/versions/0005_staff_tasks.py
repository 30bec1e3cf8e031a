"""Staff tasks: rescoring, regrading and exports run by a worker with progress
(store/models.py StaffTask).

Revision ID: 0005_staff_tasks
Revises: 0004_course_roles_sessions
"""
from alembic import op
import sqlalchemy as sa

revision = '0005_staff_tasks'
down_revision = '0004_course_roles_sessions'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('staff_tasks',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=20), nullable=False),
    sa.Column('assignment_id', sa.Integer(), nullable=False),
    sa.Column('requested_by_id', sa.Integer(), nullable=True),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('progress_done', sa.Integer(), nullable=False),
    sa.Column('progress_total', sa.Integer(), nullable=False),
    sa.Column('summary', sa.Text(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('result', sa.LargeBinary(), nullable=True),
    sa.Column('result_name', sa.String(length=255), nullable=True),
    sa.Column('result_type', sa.String(length=100), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('heartbeat_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.CheckConstraint("kind IN ('rescore', 'regrade', 'grades_csv', 'gradescope_zip')", name=op.f('ck_staff_tasks_kind_valid')),
    sa.CheckConstraint("status IN ('queued', 'running', 'done', 'failed')", name=op.f('ck_staff_tasks_status_valid')),
    sa.ForeignKeyConstraint(['assignment_id'], ['assignments.id'], name=op.f('fk_staff_tasks_assignment_id_assignments'),
                            ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['requested_by_id'], ['users.id'], name=op.f('fk_staff_tasks_requested_by_id_users'),
                            ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_staff_tasks'))
    )
    op.create_index(op.f('ix_staff_tasks_assignment_id'), 'staff_tasks', ['assignment_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_staff_tasks_assignment_id'), table_name='staff_tasks')
    op.drop_table('staff_tasks')
