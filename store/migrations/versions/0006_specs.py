"""Specs stored once: a `specs` table keyed by content hash holds each spec's TOML; assignments
point at the row in force instead of carrying the text and its versions (store/specs.py).

Existing assignments' TOML moves into `specs` (one row per distinct text, its hash computed
here from the text), and downgrade copies it back.

Revision ID: 0006_specs
Revises: 0005_staff_tasks
"""
import hashlib

from alembic import op
import sqlalchemy as sa

revision = '0006_specs'
down_revision = '0005_staff_tasks'
branch_labels = None
depends_on = None

FK = 'fk_assignments_spec_hash_specs'


def upgrade() -> None:
    op.create_table('specs',
    sa.Column('hash', sa.String(length=64), nullable=False),
    sa.Column('spec_version', sa.String(length=50), nullable=False),
    sa.Column('thresholds_version', sa.String(length=50), nullable=False),
    sa.Column('toml', sa.Text(), nullable=False),
    sa.Column('derived_from', sa.String(length=64), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['derived_from'], ['specs.hash'], name=op.f('fk_specs_derived_from_specs')),
    sa.PrimaryKeyConstraint('hash', name=op.f('pk_specs'))
    )
    conn = op.get_bind()
    rows = conn.execute(sa.text(
        "SELECT id, spec_toml, spec_version, thresholds_version FROM assignments ORDER BY id")).all()
    seen = set()
    for assignment_id, toml, spec_version, thresholds_version in rows:
        digest = hashlib.sha256(toml.encode('utf-8')).hexdigest()    # as grader.spec.from_toml hashes it
        if digest not in seen:
            seen.add(digest)
            conn.execute(sa.text("INSERT INTO specs (hash, spec_version, thresholds_version, toml) "
                                 "VALUES (:h, :s, :t, :toml)"),
                         {"h": digest, "s": spec_version, "t": thresholds_version, "toml": toml})
        conn.execute(sa.text("UPDATE assignments SET spec_hash = :h WHERE id = :id"), {"h": digest, "id": assignment_id})
    op.create_foreign_key(op.f(FK), 'assignments', 'specs', ['spec_hash'], ['hash'])
    op.create_index(op.f('ix_assignments_spec_hash'), 'assignments', ['spec_hash'], unique=False)
    op.drop_column('assignments', 'spec_toml')
    op.drop_column('assignments', 'spec_version')
    op.drop_column('assignments', 'thresholds_version')


def downgrade() -> None:
    op.add_column('assignments', sa.Column('thresholds_version', sa.String(length=50), nullable=True))
    op.add_column('assignments', sa.Column('spec_version', sa.String(length=50), nullable=True))
    op.add_column('assignments', sa.Column('spec_toml', sa.Text(), nullable=True))
    op.execute("UPDATE assignments AS a SET spec_toml = s.toml, spec_version = s.spec_version, "
               "thresholds_version = s.thresholds_version FROM specs AS s WHERE s.hash = a.spec_hash")
    for column in ('thresholds_version', 'spec_version', 'spec_toml'):
        op.alter_column('assignments', column, nullable=False)
    op.drop_index(op.f('ix_assignments_spec_hash'), table_name='assignments')
    op.drop_constraint(op.f(FK), 'assignments', type_='foreignkey')
    op.drop_table('specs')
