"""Course problem folders a site admin uploaded (store/problem_folders.py): each kept as a zip,
named by its sha256, which a spec pins; every worker reads it from here.

Revision ID: 0011_problem_folders
Revises: 0010_nightly_not_proposed
"""
from alembic import op
import sqlalchemy as sa

revision = '0011_problem_folders'
down_revision = '0010_nightly_not_proposed'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'problem_folders',
        sa.Column('sha256', sa.String(length=64), nullable=False),
        sa.Column('name', sa.String(length=40), nullable=False),
        sa.Column('title', sa.String(length=200), nullable=False),
        sa.Column('archive', sa.LargeBinary(), nullable=False),
        sa.Column('check_table', sa.Text(), nullable=False),
        sa.Column('uploaded_by_id', sa.Integer(), nullable=True),
        sa.Column('uploaded_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
        sa.ForeignKeyConstraint(['uploaded_by_id'], ['users.id'], name=op.f('fk_problem_folders_uploaded_by_id_users'),
                                ondelete='SET NULL'),
        sa.PrimaryKeyConstraint('sha256', name=op.f('pk_problem_folders')),
    )
    op.create_index(op.f('ix_problem_folders_name'), 'problem_folders', ['name'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_problem_folders_name'), table_name='problem_folders')
    op.drop_table('problem_folders')
