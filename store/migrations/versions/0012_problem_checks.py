"""The check of a problem folder a site admin uploads is a staff task on the staff queue, not work
inside the upload's web request: a task may be about no assignment (the site's problem
folders), and it holds the uploaded archive until a worker has checked it. An assignment's
export of the simulator against hardware (workers/exports.py agreement_rows) is a task kind too.

Revision ID: 0012_problem_checks
Revises: 0011_problem_folders
"""
from alembic import op
import sqlalchemy as sa

revision = '0012_problem_checks'
down_revision = '0011_problem_folders'
branch_labels = None
depends_on = None

OLD_KINDS = "kind IN ('rescore', 'regrade', 'grades_csv', 'gradescope_zip')"
NEW_KINDS = "kind IN ('rescore', 'regrade', 'grades_csv', 'gradescope_zip', 'agreement_csv', 'problem_check')"


def upgrade() -> None:
    op.drop_constraint(op.f('ck_staff_tasks_kind_valid'), 'staff_tasks', type_='check')
    op.create_check_constraint(op.f('ck_staff_tasks_kind_valid'), 'staff_tasks', NEW_KINDS)
    op.alter_column('staff_tasks', 'assignment_id', existing_type=sa.Integer(), nullable=True)
    op.create_check_constraint(op.f('ck_staff_tasks_assignment_for_kind'), 'staff_tasks',
                               "(kind IN ('problem_check')) = (assignment_id IS NULL)")
    op.add_column('staff_tasks', sa.Column('upload', sa.LargeBinary(), nullable=True))
    op.add_column('staff_tasks', sa.Column('upload_name', sa.String(length=255), nullable=True))


def downgrade() -> None:
    # problem checks have no assignment to keep them under the old rules; their folders, if
    # stored, stay in problem_folders
    op.execute("DELETE FROM staff_tasks WHERE kind IN ('problem_check', 'agreement_csv')")
    op.drop_column('staff_tasks', 'upload_name')
    op.drop_column('staff_tasks', 'upload')
    op.drop_constraint(op.f('ck_staff_tasks_assignment_for_kind'), 'staff_tasks', type_='check')
    op.alter_column('staff_tasks', 'assignment_id', existing_type=sa.Integer(), nullable=False)
    op.drop_constraint(op.f('ck_staff_tasks_kind_valid'), 'staff_tasks', type_='check')
    op.create_check_constraint(op.f('ck_staff_tasks_kind_valid'), 'staff_tasks', OLD_KINDS)
