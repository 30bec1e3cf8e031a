"""Staff tasks on the site: a TA starts a rescore, a regrade or an export of an assignment (a
site admin the check of an uploaded problem folder, web/staff/problem_uploads.py); a worker does
it (workers/staff_tasks.py) while the task's page shows the progress, then the result: what was
done, and an export's file (a check's table) to download."""
from __future__ import annotations

import re

from flask import Response, flash, jsonify, redirect, render_template, request, url_for
from flask_login import current_user
from sqlalchemy import func, select

from grader.vocabulary import Backend, StaffTaskStatus
from store.models import ASSIGNMENT_TASK_KINDS, StaffTask, Submission
from workers import enqueue, staff_tasks

from .. import courses, db
from ..errors import UserError
from ..forms import SimpleActionForm
from . import bp
from .console import backends_without_worker
from .problem_uploads import check_rows


def start(assignment, kind: str) -> StaffTask:
    return staff_tasks.start(db.session(), kind, assignment, current_user.id)


@bp.route("/assignments/<name>/tasks/<kind>", methods=["POST"])
def start_task(name: str, kind: str):
    session = db.session()
    assignment = courses.staff_assignment(session, current_user, name)
    if kind not in ASSIGNMENT_TASK_KINDS:
        raise UserError(f"There is no staff task {kind!r}.", f"Use one of: {', '.join(ASSIGNMENT_TASK_KINDS)}.", 404)
    if not SimpleActionForm().validate_on_submit():
        raise UserError("The form was incomplete.", "Use the buttons on the assignment page.")
    if kind == "regrade" and request.form.get("confirmed") != "yes":
        # it runs every student's kernel again and queues as many grades: said first, done on a second yes
        return render_template("staff/regrade_confirm.html", assignment=assignment, action_form=SimpleActionForm(),
                               students=_students_with_submissions(session, assignment),
                               no_worker=backends_without_worker(enqueue.queue_stats(session))
                               .get(Backend(assignment.backend)))
    task = start(assignment, kind)
    return redirect(url_for("staff.task_page", task_id=task.id), 303)


def _students_with_submissions(session, assignment) -> int:
    """How many students a regrade grades again (each one's latest submission)."""
    return int(session.scalar(select(func.count(func.distinct(Submission.user_id)))
                              .where(Submission.assignment_id == assignment.id)) or 0)


def _task(task_id: int) -> StaffTask:
    """The task, if it is about a course the viewer is staff of (a site's task, such as a problem
    check: if the viewer is a site admin); any other is as missing."""
    task = db.session().get(StaffTask, task_id)
    if task is None or not (current_user.is_admin if task.assignment is None
                            else current_user.is_staff_of(task.assignment.course_id)):
        raise UserError(f"There is no task {task_id} in your courses.", "Start one from an assignment's page.", 404)
    return task


def status_json(task: StaffTask) -> dict:
    return {"id": task.id, "kind": task.kind, "status": task.status, "final": StaffTaskStatus(task.status).final,
            "waiting": task.status == StaffTaskStatus.QUEUED,          # no worker has taken it yet
            "done": task.progress_done,
            "total": task.progress_total, "summary": task.summary, "error": task.error,
            "progress": staff_tasks.progress_text(task.kind, task.progress_done, task.progress_total),
            "download": url_for("staff.task_download", task_id=task.id) if task.result is not None else None}


@bp.route("/tasks/<int:task_id>")
def task_page(task_id: int):
    task = _task(task_id)
    # a problem check's table is shown on its page (the task's file is that table)
    table = task.result.decode() if task.kind == "problem_check" and task.result is not None else None
    stored = task.status == StaffTaskStatus.DONE and table and re.search(r"^sha256 ([0-9a-f]{64})$", table, re.M)
    return render_template("staff/task.html", task=task, title=staff_tasks.TITLES[task.kind],
                           status=status_json(task), table=table, check_rows=check_rows,
                           stored=stored and stored.group(1), no_worker=_no_staff_worker(task))


def _no_staff_worker(task: StaffTask) -> str | None:
    """What to start when a task waits and no live worker serves the staff queue (else None)."""
    if task.status != StaffTaskStatus.QUEUED or enqueue.worker_alive_on(db.session(), staff_tasks.QUEUE):
        return None
    return (f"No worker alive serves the {staff_tasks.QUEUE} queue: this task waits until one starts "
            f"(grader worker --queue {staff_tasks.QUEUE}; the staff console's Queue section lists the workers alive).")


@bp.route("/tasks/<int:task_id>/status")
def task_status(task_id: int):
    return jsonify(status_json(_task(task_id)))


@bp.route("/tasks/<int:task_id>/download")
def task_download(task_id: int):
    task = _task(task_id)
    if task.result is None:
        raise UserError(f"Task {task_id} has no file (it is {task.status}).",
                        "Wait until it is done; exports have a file, rescores and regrades do not.", 409)
    name = (task.result_name or "export").replace('"', "")
    return Response(task.result, mimetype=task.result_type or "application/octet-stream",
                    headers={"Content-Disposition": f'attachment; filename="{name}"'})


def flash_started(task: StaffTask, message: str = "") -> None:
    flash((message + " " if message else "") + f"{staff_tasks.TITLES[task.kind]}: started as task {task.id}.",
          "success")
