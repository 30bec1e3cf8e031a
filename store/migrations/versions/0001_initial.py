"""Initial schema: every table of store/models.py as first released. Later changes are revisions of
their own (tests/store/test_migrations.py compares the head with the models).

Revision ID: 0001_initial
Revises: 
"""
from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

revision = '0001_initial'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('courses',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('leaderboard_visibility', sa.String(length=16), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.CheckConstraint("leaderboard_visibility IN ('public', 'signed_in')", name=op.f('ck_courses_leaderboard_visibility_valid')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_courses')),
    sa.UniqueConstraint('name', name=op.f('uq_courses_name'))
    )
    op.create_table('nightly_runs',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('trigger', sa.String(length=16), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_nightly_runs'))
    )
    op.create_table('users',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('email', sa.String(length=320), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('role', sa.String(length=16), nullable=False),
    sa.Column('password_hash', sa.String(length=255), nullable=True),
    sa.Column('nickname', sa.String(length=64), nullable=True),
    sa.Column('active', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.CheckConstraint("role IN ('student', 'ta', 'admin')", name=op.f('ck_users_role_valid')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_users')),
    sa.UniqueConstraint('email', name=op.f('uq_users_email')),
    sa.UniqueConstraint('nickname', name=op.f('uq_users_nickname'))
    )
    op.create_table('worker_heartbeats',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('queues', sa.String(length=100), nullable=False),
    sa.Column('pid', sa.Integer(), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('seen_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_worker_heartbeats')),
    sa.UniqueConstraint('name', name=op.f('uq_worker_heartbeats_name'))
    )
    op.create_table('api_tokens',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('token_hash', sa.String(length=128), nullable=False),
    sa.Column('label', sa.String(length=100), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('last_used_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_api_tokens_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_api_tokens')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_api_tokens_token_hash'))
    )
    op.create_index(op.f('ix_api_tokens_user_id'), 'api_tokens', ['user_id'], unique=False)
    op.create_table('assignments',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('course_id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('title', sa.String(length=200), nullable=False),
    sa.Column('spec_name', sa.String(length=200), nullable=False),
    sa.Column('spec_version', sa.String(length=50), nullable=False),
    sa.Column('thresholds_version', sa.String(length=50), nullable=False),
    sa.Column('spec_hash', sa.String(length=64), nullable=False),
    sa.Column('spec_toml', sa.Text(), nullable=False),
    sa.Column('backend', sa.String(length=16), nullable=False),
    sa.Column('deadline', sa.DateTime(timezone=True), nullable=True),
    sa.Column('runs_per_hour', sa.Integer(), nullable=False),
    sa.Column('active', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.CheckConstraint("backend IN ('sim', 'neuron')", name=op.f('ck_assignments_backend_valid')),
    sa.ForeignKeyConstraint(['course_id'], ['courses.id'], name=op.f('fk_assignments_course_id_courses'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_assignments')),
    sa.UniqueConstraint('name', name=op.f('uq_assignments_name'))
    )
    op.create_index(op.f('ix_assignments_course_id'), 'assignments', ['course_id'], unique=False)
    op.create_table('enrollments',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('course_id', sa.Integer(), nullable=False),
    sa.Column('role', sa.String(length=16), nullable=False),
    sa.CheckConstraint("role IN ('student', 'ta', 'admin')", name=op.f('ck_enrollments_role_valid')),
    sa.ForeignKeyConstraint(['course_id'], ['courses.id'], name=op.f('fk_enrollments_course_id_courses'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_enrollments_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_enrollments')),
    sa.UniqueConstraint('user_id', 'course_id', name='uq_enrollments_user_course')
    )
    op.create_index(op.f('ix_enrollments_course_id'), 'enrollments', ['course_id'], unique=False)
    op.create_table('login_tokens',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('token_hash', sa.String(length=128), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('used_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_login_tokens_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_login_tokens')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_login_tokens_token_hash'))
    )
    op.create_index(op.f('ix_login_tokens_user_id'), 'login_tokens', ['user_id'], unique=False)
    op.create_table('nightly_results',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('nightly_run_id', sa.Integer(), nullable=False),
    sa.Column('spec_name', sa.String(length=200), nullable=False),
    sa.Column('spec_version', sa.String(length=50), nullable=False),
    sa.Column('thresholds_version', sa.String(length=50), nullable=False),
    sa.Column('reference_kernel', sa.String(length=100), nullable=False),
    sa.Column('backend', sa.String(length=16), nullable=False),
    sa.Column('p99_us', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('passed', sa.Boolean(), nullable=False),
    sa.Column('drift', sa.Boolean(), nullable=False),
    sa.Column('drift_reason', sa.Text(), nullable=True),
    sa.Column('implied_thresholds', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('thresholds_in_force', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('score_total', sa.Float(), nullable=True),
    sa.Column('report', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['nightly_run_id'], ['nightly_runs.id'], name=op.f('fk_nightly_results_nightly_run_id_nightly_runs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_nightly_results'))
    )
    op.create_index(op.f('ix_nightly_results_nightly_run_id'), 'nightly_results', ['nightly_run_id'], unique=False)
    op.create_index('ix_nightly_results_spec_kernel_backend', 'nightly_results', ['spec_name', 'reference_kernel', 'backend'], unique=False)
    op.create_table('deadline_extensions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('assignment_id', sa.Integer(), nullable=False),
    sa.Column('deadline', sa.DateTime(timezone=True), nullable=False),
    sa.Column('granted_by_id', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['assignment_id'], ['assignments.id'], name=op.f('fk_deadline_extensions_assignment_id_assignments'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['granted_by_id'], ['users.id'], name=op.f('fk_deadline_extensions_granted_by_id_users'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_deadline_extensions_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_deadline_extensions')),
    sa.UniqueConstraint('user_id', 'assignment_id', name='uq_deadline_extensions_user_assignment')
    )
    op.create_index(op.f('ix_deadline_extensions_assignment_id'), 'deadline_extensions', ['assignment_id'], unique=False)
    op.create_table('submissions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('assignment_id', sa.Integer(), nullable=False),
    sa.Column('filename', sa.String(length=255), nullable=False),
    sa.Column('data', sa.LargeBinary(), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('size', sa.Integer(), nullable=False),
    sa.Column('uploaded_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['assignment_id'], ['assignments.id'], name=op.f('fk_submissions_assignment_id_assignments'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_submissions_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_submissions'))
    )
    op.create_index('ix_submissions_assignment_user', 'submissions', ['assignment_id', 'user_id'], unique=False)
    op.create_index(op.f('ix_submissions_user_id'), 'submissions', ['user_id'], unique=False)
    op.create_table('thresholds_versions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('assignment_id', sa.Integer(), nullable=False),
    sa.Column('version', sa.String(length=50), nullable=False),
    sa.Column('thresholds', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('source', sa.String(length=16), nullable=False),
    sa.Column('adopted_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.CheckConstraint("source IN ('spec', 'nightly')", name=op.f('ck_thresholds_versions_source_valid')),
    sa.ForeignKeyConstraint(['assignment_id'], ['assignments.id'], name=op.f('fk_thresholds_versions_assignment_id_assignments'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_thresholds_versions')),
    sa.UniqueConstraint('assignment_id', 'version', name='uq_thresholds_versions_assignment_version')
    )
    op.create_table('grading_runs',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('submission_id', sa.Integer(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('backend', sa.String(length=16), nullable=False),
    sa.Column('queue', sa.String(length=16), nullable=False),
    sa.Column('worker', sa.String(length=200), nullable=True),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('heartbeat_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('queued_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('seed', sa.BigInteger(), nullable=True),
    sa.Column('report', postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    sa.Column('score_total', sa.Float(), nullable=True),
    sa.Column('max_total', sa.Float(), nullable=True),
    sa.Column('thresholds_version', sa.String(length=50), nullable=True),
    sa.Column('flagged', sa.Boolean(), nullable=False),
    sa.Column('flag_reason', sa.Text(), nullable=True),
    sa.Column('cancel_requested', sa.Boolean(), nullable=False),
    sa.Column('celery_task_id', sa.String(length=64), nullable=True),
    sa.Column('progress_done', sa.Integer(), nullable=False),
    sa.Column('progress_total', sa.Integer(), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.CheckConstraint("backend IN ('sim', 'neuron')", name=op.f('ck_grading_runs_backend_valid')),
    sa.CheckConstraint("queue IN ('sim', 'trn2')", name=op.f('ck_grading_runs_queue_valid')),
    sa.CheckConstraint("status IN ('queued', 'running', 'done', 'failed', 'infra_error', 'cancelled')", name=op.f('ck_grading_runs_status_valid')),
    sa.ForeignKeyConstraint(['submission_id'], ['submissions.id'], name=op.f('fk_grading_runs_submission_id_submissions'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_grading_runs'))
    )
    op.create_index('ix_grading_runs_status_queued_at', 'grading_runs', ['status', 'queued_at'], unique=False)
    op.create_index(op.f('ix_grading_runs_submission_id'), 'grading_runs', ['submission_id'], unique=False)
    op.create_table('test_results',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.Integer(), nullable=False),
    sa.Column('test_name', sa.String(length=100), nullable=False),
    sa.Column('kind', sa.String(length=20), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('points', sa.Float(), nullable=False),
    sa.Column('max_points', sa.Float(), nullable=False),
    sa.Column('p99_us', sa.Float(), nullable=True),
    sa.ForeignKeyConstraint(['run_id'], ['grading_runs.id'], name=op.f('fk_test_results_run_id_grading_runs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_test_results')),
    sa.UniqueConstraint('run_id', 'test_name', name='uq_test_results_run_test')
    )


def downgrade() -> None:
    op.drop_table('test_results')
    op.drop_index(op.f('ix_grading_runs_submission_id'), table_name='grading_runs')
    op.drop_index('ix_grading_runs_status_queued_at', table_name='grading_runs')
    op.drop_table('grading_runs')
    op.drop_table('thresholds_versions')
    op.drop_index(op.f('ix_submissions_user_id'), table_name='submissions')
    op.drop_index('ix_submissions_assignment_user', table_name='submissions')
    op.drop_table('submissions')
    op.drop_index(op.f('ix_deadline_extensions_assignment_id'), table_name='deadline_extensions')
    op.drop_table('deadline_extensions')
    op.drop_index('ix_nightly_results_spec_kernel_backend', table_name='nightly_results')
    op.drop_index(op.f('ix_nightly_results_nightly_run_id'), table_name='nightly_results')
    op.drop_table('nightly_results')
    op.drop_index(op.f('ix_login_tokens_user_id'), table_name='login_tokens')
    op.drop_table('login_tokens')
    op.drop_index(op.f('ix_enrollments_course_id'), table_name='enrollments')
    op.drop_table('enrollments')
    op.drop_index(op.f('ix_assignments_course_id'), table_name='assignments')
    op.drop_table('assignments')
    op.drop_index(op.f('ix_api_tokens_user_id'), table_name='api_tokens')
    op.drop_table('api_tokens')
    op.drop_table('worker_heartbeats')
    op.drop_table('users')
    op.drop_table('nightly_runs')
    op.drop_table('courses')
