"""One best-run rule (store/runs.py): on a history with flagged, failed, queued, cancelled and
late runs, ties on total and on p99, a later worse run, a run on the other backend, an
extension and a rescore that flags a run, the leaderboard, the grades CSV and Gradescope
export, the course API (Gradescope service mode) and each student's own page name the same
counted run for every student."""
from __future__ import annotations

import csv
import datetime as dt
import io
import json
import re
import zipfile

from sqlalchemy import select

from store import runs as store_runs
from store.models import DeadlineExtension, Enrollment, GradingRun, User
from web import standings, thresholds
from webtest_helpers import export_in_process, login, measured, store_graded_run
from workers import staff_tasks

T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.timezone.utc)


def at(minutes: int) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


def _history(db, course_setup, report) -> dict:
    """Every student's runs; returns {name: User} and the run ids the rule must pick."""
    assignment, course = course_setup["assignment"], course_setup["course"]
    assignment.deadline = at(60)
    carol = User(email="carol@example.edu", name="Carol", nickname="carol_c", active=True)
    dan = User(email="dan@example.edu", name="Dan", nickname="dan_d", active=True)
    db.add_all([carol, dan, Enrollment(user=carol, course=course, role="student"),
                Enrollment(user=dan, course=course, role="student")])
    db.commit()
    db.add(DeadlineExtension(user_id=dan.id, assignment_id=assignment.id, deadline=at(180)))
    db.commit()
    alice, bob = course_setup["alice"], course_setup["bob"]

    def run(user, p99, minute, uploaded=None, **changes):
        stored = store_graded_run(db, user, assignment, measured(report, p99), finished_at=at(minute),
                                  flagged=changes.pop("flagged", False))
        stored.submission.uploaded_at = uploaded or at(minute - 1)
        for key, value in changes.items():
            setattr(stored, key, value)
        db.commit()
        return stored.id

    picks = {}
    picks["alice"] = run(alice, 32.0, 1)                     # full marks, the lowest counted p99
    run(alice, 15.0, 2, flagged=True)                        # faster but held for review
    run(alice, 20.0, 3, status="failed", score_total=None, max_total=None, report=None)
    run(alice, 35.0, 4)                                      # same total, higher p99
    run(alice, 32.0, 5)                                      # same total and p99, later
    run(alice, 55.0, 6)                                      # later and worse (relaxed tier)
    run(alice, 16.0, 90)                                     # uploaded after her deadline
    run(alice, 17.0, 7, backend="neuron")                    # another backend's board
    picks["bob"] = run(bob, 50.0, 1)                         # relaxed tier only
    run(bob, 20.0, 2, status="queued", score_total=None, report=None, finished_at=None)
    run(bob, 21.0, 3, status="cancelled")
    picks["carol"] = run(carol, 20.0, 1)                     # fast; a looser threshold makes it implausible
    picks["carol_after_rescore"] = run(carol, 35.0, 2)
    picks["dan"] = run(dan, 45.0, 150)                       # late for the course, inside his extension
    run(dan, 25.0, 200)                                      # after his extension too
    return {"people": {"alice": alice, "bob": bob, "carol": carol, "dan": dan}, "picks": picks}


def _views(app, db, course_setup, people, token) -> dict[str, dict[str, int | None]]:
    """name -> counted run id, as each view says it."""
    assignment = course_setup["assignment"]
    db.expire_all()
    ids = {u.id: name for name, u in people.items()}
    views: dict[str, dict[str, int | None]] = {}

    rule = store_runs.best_runs(db, assignment.id, "sim")
    views["rule"] = {name: rule[u.id].run_id if u.id in rule else None for name, u in people.items()}

    board = standings.compute(db, assignment.id, "sim")
    views["leaderboard"] = {name: next((s.run_id for s in board if s.user_id == u.id), None)
                            for name, u in people.items()}
    ta = app.test_client()
    assert login(ta, "tara@example.edu").status_code == 302
    page = ta.get("/leaderboard/tiny").get_data(as_text=True)
    shown = re.findall(r"<td data-nickname>([^<]+?)\s*</td>\s*<td class=\"num\"[^>]*>[^<]*</td>\s*"
                       r"<td class=\"num\">([0-9.]+) us</td>", page)
    by_run = {r.id: r for r in db.scalars(select(GradingRun))}
    expected_page = [(u.nickname, f"{sum(t.p99_us for t in by_run[rid].test_results if t.kind == 'performance'):.1f}")
                     for rid, u in ((s.run_id, db.get(User, s.user_id)) for s in board)]
    assert shown == expected_page                      # the page shows the board's runs, in its order

    rows = csv.DictReader(io.StringIO(export_in_process(ta, "tiny", "grades_csv").decode()))
    views["grades.csv"] = {r["email"].split("@")[0]: int(r["run_id"]) if r["run_id"] else None for r in rows}
    archive = zipfile.ZipFile(io.BytesIO(export_in_process(ta, "tiny", "gradescope_zip")))
    views["gradescope.zip"] = {name: None for name in people}
    for member in archive.namelist():
        results = json.loads(archive.read(member))
        views["gradescope.zip"][member.split("@")[0]] = results["extra_data"]["run_id"]

    service = app.test_client()
    views["course API"] = {}
    for name, user in people.items():
        any_run = min(r.id for r in by_run.values() if r.submission.user_id == user.id and r.finished_at)
        answer = service.get(f"/api/v1/course/runs/{any_run}", headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 200, answer.get_data(as_text=True)
        views["course API"][name] = answer.get_json()["counted"]["run_id"]    # asked of any finished run

    views["own page"] = {}
    for name, user in people.items():
        client = app.test_client()
        assert login(client, user.email).status_code == 302
        page = client.get("/a/tiny").get_data(as_text=True)
        marked = re.findall(r'<tr><td><a href="/runs/(\d+)">#\d+</a>(?:(?!</tr>).)*data-counts', page, re.S)
        said = re.search(r'<p data-counted>Your counted run is <a href="/runs/(\d+)">', page)
        assert [int(m) for m in marked] == ([int(said.group(1))] if said else [])
        views["own page"][name] = int(said.group(1)) if said else None
    assert set(ids.values()) == set(people)
    return views


def test_every_view_counts_the_same_run(app, db, course_setup, tiny_reports, client_for):
    from workers.course_tokens import new_token
    from store.lifecycle import mark_standings_changed
    setup = _history(db, course_setup, tiny_reports["optimized"])
    people, picks = setup["people"], setup["picks"]
    for user in people.values():              # every student has a password for their own page
        from web import accounts
        accounts.set_password(db.get(User, user.id), "correct horse battery")
    token = new_token(db, course_setup["course"], "gradescope")
    db.commit()

    expected = {name: picks[name] for name in people}
    views = _views(app, db, course_setup, people, token)
    for view, counted in views.items():
        assert counted == expected, f"{view} disagrees with the rule"

    # staff loosen the thresholds and rescore: carol's 20 us run is now implausibly fast (flagged)
    assignment = db.get(type(course_setup["assignment"]), course_setup["assignment"].id)
    thresholds.adopt(db, assignment, "t2", {"perf_tiny": {"optimized": 90.0, "relaxed": 120.0}})
    db.commit()
    staff_tasks.rescore_all(db, assignment)
    mark_standings_changed(db, assignment_ids=[assignment.id])
    db.commit()
    assert db.get(GradingRun, picks["carol"]).flagged
    expected["carol"] = picks["carol_after_rescore"]
    views = _views(app, db, course_setup, people, token)
    for view, counted in views.items():
        assert counted == expected, f"{view} disagrees with the rule after the rescore"
    assert db.get(GradingRun, picks["bob"]).score_total == 7.5       # bob's 50 us run is now in the top tier


def test_an_extension_puts_a_late_run_on_the_board_at_the_next_view(app, db, course_setup, tiny_reports,
                                                                      client_for):
    """Deadlines are part of the rule, so granting an extension moves the standings stamp: with a
    long cache (as in production) the late run counts from the next view, not an hour later."""
    from webtest_helpers import csrf_of
    app.config["LEADERBOARD_CACHE_SECONDS"] = 3600.0
    assignment = course_setup["assignment"]
    assignment.deadline = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)
    db.commit()
    late = store_graded_run(db, course_setup["bob"], assignment, measured(tiny_reports["optimized"], 30.0))
    bob = client_for("bob")
    assert "bobby" not in bob.get("/leaderboard/tiny").get_data(as_text=True)      # cached without him
    assert "No run of yours counts yet." in bob.get("/a/tiny").get_data(as_text=True)
    ta = client_for("tara")
    until = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    token = csrf_of(ta.get("/staff/assignments/tiny").get_data(as_text=True))
    granted = ta.post("/staff/assignments/tiny/extensions",
                      data={"csrf_token": token, "email": "bob@example.edu", "deadline": until})
    assert granted.status_code == 303
    assert re.findall(r"<td data-nickname>([^<(]+?)\s*(?:\(you\))?</td>",
                      bob.get("/leaderboard/tiny").get_data(as_text=True)) == ["bobby"]
    assert f'Your counted run is <a href="/runs/{late.id}">' in bob.get("/a/tiny").get_data(as_text=True)
