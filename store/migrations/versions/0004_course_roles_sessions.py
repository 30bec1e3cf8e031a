"""Roles per course and sessions kept on the server.

- users.role becomes the site role only: 'admin' or 'user'. What a person is in a course (student,
  ta, instructor) is on the enrollment; a former site-wide 'ta' keeps the role of each of their
  enrollments, and an admin's enrollments become 'instructor'.
- login_tokens.revoked_at: a newer link (or using one) revokes the older ones.
- user_sessions: the server's record of each signed-in browser (store/models.py UserSession).

Revision ID: 0004_course_roles_sessions
Revises: 0003_course_submit_tokens
"""
from alembic import op
import sqlalchemy as sa

revision = '0004_course_roles_sessions'
down_revision = '0003_course_submit_tokens'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_constraint(op.f('ck_users_role_valid'), 'users', type_='check')
    op.execute("UPDATE users SET role = 'user' WHERE role <> 'admin'")
    op.create_check_constraint(op.f('ck_users_role_valid'), 'users', "role IN ('user', 'admin')")
    op.drop_constraint(op.f('ck_enrollments_role_valid'), 'enrollments', type_='check')
    op.execute("UPDATE enrollments SET role = 'instructor' WHERE role = 'admin'")
    op.create_check_constraint(op.f('ck_enrollments_role_valid'), 'enrollments', "role IN ('student', 'ta', 'instructor')")

    op.add_column('login_tokens', sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True))

    op.create_table('user_sessions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('user_id', sa.Integer(), nullable=False),
    sa.Column('token_hash', sa.String(length=128), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('last_seen_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('revoked_why', sa.String(length=100), nullable=True),
    sa.Column('client', sa.String(length=200), nullable=False),
    sa.ForeignKeyConstraint(['user_id'], ['users.id'], name=op.f('fk_user_sessions_user_id_users'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_user_sessions')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_user_sessions_token_hash'))
    )
    op.create_index(op.f('ix_user_sessions_user_id'), 'user_sessions', ['user_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_user_sessions_user_id'), table_name='user_sessions')
    op.drop_table('user_sessions')
    op.drop_column('login_tokens', 'revoked_at')
    op.drop_constraint(op.f('ck_enrollments_role_valid'), 'enrollments', type_='check')
    op.execute("UPDATE enrollments SET role = 'admin' WHERE role = 'instructor'")
    op.create_check_constraint(op.f('ck_enrollments_role_valid'), 'enrollments', "role IN ('student', 'ta', 'admin')")
    op.drop_constraint(op.f('ck_users_role_valid'), 'users', type_='check')
    op.execute("""UPDATE users SET role = CASE WHEN EXISTS (SELECT 1 FROM enrollments e WHERE e.user_id = users.id
                  AND e.role = 'ta') THEN 'ta' ELSE 'student' END WHERE role = 'user'""")
    op.create_check_constraint(op.f('ck_users_role_valid'), 'users', "role IN ('student', 'ta', 'admin')")
