"""A run's lateness in the JSON APIs (issue 46): `GET /api/v1/runs/<id>` and the course API's
`GET /api/v1/course/runs/<id>` say whether the run is late, by how many days against the
student's own deadline, and what the assignment's late rule lets it count for, as the pages do."""
from __future__ import annotations

import datetime as dt
import io

from store.models import Assignment, DeadlineExtension
from webtest_helpers import OPTIMIZED, measured, store_graded_run

T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.timezone.utc)      # the deadline
HOUR = dt.timedelta(hours=1)
DAY = dt.timedelta(days=1)


def token_for(db, user) -> dict:
    from web.accounts import new_api_token
    token = new_api_token(db, user, "test")
    db.commit()
    return {"Authorization": f"Bearer {token}"}


def run_at(db, user, assignment, report, uploaded: dt.datetime):
    run = store_graded_run(db, user, assignment, report, finished_at=uploaded + 2 * dt.timedelta(minutes=1))
    run.submission.uploaded_at = uploaded
    db.commit()
    return run


def lateness(client, headers, run_id: int) -> dict:
    response = client.get(f"/api/v1/runs/{run_id}", headers=headers)
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()["lateness"]


def test_the_run_status_says_how_late_a_run_is_and_what_the_rule_lets_it_count_for(app, db, course_setup,
                                                                                     tiny_reports):
    a, alice = course_setup["assignment"], course_setup["alice"]
    a.deadline, a.late_rule, a.late_factors = T0, "credit-steps", [0.9, 0.5]
    db.commit()
    report = measured(tiny_reports["optimized"], 20.0)
    on_time = run_at(db, alice, a, report, T0 - HOUR)
    a_day = run_at(db, alice, a, report, T0 + HOUR)
    three_days = run_at(db, alice, a, report, T0 + 2 * DAY + HOUR)
    client, me = app.test_client(), token_for(db, alice)

    assert lateness(client, me, on_time.id) == {
        "late": False, "days_late": 0, "submitted_at": (T0 - HOUR).isoformat(), "deadline": T0.isoformat(),
        "extended": False, "rule": "credit-steps", "counts": True, "factor": 1.0, "note": ""}
    one = lateness(client, me, a_day.id)
    assert (one["late"], one["days_late"], one["counts"], one["factor"]) == (True, 1, True, 0.9)
    assert one["note"] == "late by 1 day: earns 90% of its points"              # the pages' words
    three = lateness(client, me, three_days.id)
    assert (three["days_late"], three["counts"], three["factor"]) == (3, False, 0.0)
    assert three["note"] == "late by 3 days: past the late steps, earns nothing"

    # her own deadline: an extension past the third run's upload makes it on time
    extension = DeadlineExtension(user_id=alice.id, assignment_id=a.id, deadline=T0 + 3 * DAY)
    db.add(extension)
    db.commit()
    extended = lateness(client, me, three_days.id)
    assert (extended["late"], extended["days_late"], extended["extended"], extended["counts"]) == (False, 0, True, True)
    assert extended["deadline"] == (T0 + 3 * DAY).isoformat()

    # the extension withdrawn and the rule changed: a late run is graded, never counted
    db.delete(extension)
    a.late_rule, a.late_factors = "graded-not-counted", []
    db.commit()
    not_counted = lateness(client, me, a_day.id)
    assert (not_counted["rule"], not_counted["counts"], not_counted["factor"]) == ("graded-not-counted", False, 0.0)
    assert not_counted["note"] == "late by 1 day: graded, not counted"

    # a run still waiting says it too (lateness is the upload's, known at once); staff read hers, others get 404
    bob = token_for(db, course_setup["bob"])
    made = client.post("/api/v1/assignments/tiny/submissions", headers=bob,
                       data={"file": (io.BytesIO(OPTIMIZED), "conv2d.py")})
    assert made.status_code == 201, made.get_data(as_text=True)
    waiting = lateness(client, bob, made.get_json()["run_id"])
    assert waiting["late"] and waiting["days_late"] >= 1 and not waiting["counts"]
    assert lateness(client, token_for(db, course_setup["tara"]), a_day.id) == not_counted
    assert client.get(f"/api/v1/runs/{a_day.id}", headers=bob).status_code == 404


def test_under_late_days_the_status_says_whether_the_days_spent_cover_the_run(app, db, course_setup, tiny_reports):
    a, alice, course = course_setup["assignment"], course_setup["alice"], course_setup["course"]
    a.deadline, a.late_rule, course.late_days = T0, "late-days", 2
    db.commit()
    partial, full = measured(tiny_reports["optimized"], 55.0), measured(tiny_reports["optimized"], 20.0)
    run_at(db, alice, a, partial, T0 - HOUR)
    covered = run_at(db, alice, a, full, T0 + HOUR)                  # 1 day: raises her grade, so spent
    too_late = run_at(db, alice, a, full, T0 + 2 * DAY + HOUR)       # 3 days: more than she has
    client, me = app.test_client(), token_for(db, alice)
    one = lateness(client, me, covered.id)
    assert (one["days_late"], one["counts"], one["factor"]) == (1, True, 1.0)
    assert one["late_days"] == {"spent_here": 1, "budget": 2}
    assert one["note"] == "late by 1 day: counts, with 1 late day"
    three = lateness(client, me, too_late.id)
    assert (three["days_late"], three["counts"], three["factor"]) == (3, False, 0.0)
    assert three["note"] == "late by 3 days: counts only with 3 late days"


def test_the_course_api_status_holds_a_gradescope_run_to_gradescopes_time(app, db, course_setup):
    from workers.course_tokens import new_token
    a = course_setup["assignment"]
    deadline = dt.datetime.now(dt.timezone.utc) - HOUR
    db.get(Assignment, a.id).deadline = deadline
    token = new_token(db, course_setup["course"], "gradescope")
    db.commit()
    client, auth = app.test_client(), {"Authorization": f"Bearer {token}"}

    def send(**fields):
        made = client.post("/api/v1/course/assignments/tiny/submissions", headers=auth,
                           data={"email": "alice@example.edu", "file": (io.BytesIO(OPTIMIZED), "conv2d.py"), **fields})
        assert made.status_code == 201, made.get_data(as_text=True)
        return client.get(f"/api/v1/course/runs/{made.get_json()['run_id']}", headers=auth).get_json()["lateness"]

    submitted = deadline - HOUR                                       # on Gradescope before the deadline
    in_time = send(gradescope_submission_id="gs-1", created_at=submitted.isoformat())
    assert (in_time["late"], in_time["days_late"], in_time["counts"]) == (False, 0, True)
    assert in_time["submitted_at"] == submitted.isoformat() and in_time["deadline"] == deadline.isoformat()
    late = send(gradescope_submission_id="gs-2")                     # no Gradescope time: the upload's
    assert (late["late"], late["days_late"], late["counts"], late["rule"]) == (True, 1, False, "graded-not-counted")
    assert late["note"] == "late by 1 day: graded, not counted"
