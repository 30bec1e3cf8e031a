"""The leaderboard: best run per student, ranked by total then by the sum of performance
p99s, flagged runs hidden, backends apart, visibility per course."""
from __future__ import annotations

import re

from store.models import Enrollment, User

from webtest_helpers import measured, store_graded_run


def ranked_nicknames(page: str) -> list[str]:
    return re.findall(r"<td data-nickname>([^<(]+?)\s*(?:\(you\))?</td>", page)


def test_three_students_ranked_by_total_then_p99_sum(client_for, db, course_setup, tiny_reports):
    assignment, base = course_setup["assignment"], tiny_reports["optimized"]
    carol = User(email="carol@example.edu", name="Carol", nickname="carol_c", active=True)
    db.add_all([carol, Enrollment(user=carol, course=course_setup["course"], role="student")])
    db.commit()
    # alice: full marks at 30 us (and an older, worse run); bob: full marks at 38 us;
    # carol: the relaxed tier (60 us > 40 us optimized); her faster run is flagged and hidden
    store_graded_run(db, course_setup["alice"], assignment, measured(base, 55.0))
    store_graded_run(db, course_setup["alice"], assignment, measured(base, 30.0))
    store_graded_run(db, course_setup["bob"], assignment, measured(base, 38.0))
    store_graded_run(db, carol, assignment, measured(base, 50.0))
    store_graded_run(db, carol, assignment, measured(base, 20.0), flagged=True)
    store_graded_run(db, course_setup["tara"], assignment, measured(base, 10.0))     # staff are not ranked
    page = client_for("bob").get("/leaderboard/tiny").get_data(as_text=True)
    assert ranked_nicknames(page) == ["alice_k", "bobby", "carol_c"]
    assert "highest total score, ties broken by the lowest sum of performance-test p99" in page
    assert "simulated (nkisim)" in page                                   # backend shown
    assert ">one small image, float16</th>" in page and "perf_tiny" not in page   # columns by title, not id
    assert ">Performance p99 (us)</th>" in page                                # cells are bare numbers: the unit is said once
    assert '<div class="table-scroll">' in page                           # wide tables scroll in their box
    assert "#rank-2 { background" in page and "you (<span data-me>bobby</span>) are" in page
    hardware = client_for("bob").get("/leaderboard/tiny?backend=neuron").get_data(as_text=True)
    assert ranked_nicknames(hardware) == []                            # simulated runs never ranked with hardware


def test_visibility_follows_the_course_setting(app, client_for, db, course_setup, tiny_reports):
    store_graded_run(db, course_setup["alice"], course_setup["assignment"], measured(tiny_reports["optimized"], 30.0))
    anonymous = app.test_client()
    assert anonymous.get("/leaderboard/tiny").status_code == 302         # signed_in: sign in first
    course_setup["course"].leaderboard_visibility = "public"
    db.commit()
    page = anonymous.get("/leaderboard/tiny")
    assert page.status_code == 200 and ranked_nicknames(page.get_data(as_text=True)) == ["alice_k"]
    assert "alice@example.edu" not in page.get_data(as_text=True)        # nicknames only


def test_a_finished_grade_and_a_nickname_show_at_the_next_request(app, client_for, db, course_setup, tiny_reports):
    """With a long cache (as in production), the board is never staler than the last write: a grade
    finished by a worker (store.lifecycle.finish) and a nickname change move the assignment's stamp,
    and the next view recomputes. Students without a nickname get distinct pseudonyms."""
    from webtest_helpers import csrf_of
    from store import lifecycle as runs
    import web
    app.config["LEADERBOARD_CACHE_SECONDS"] = 3600.0
    other_process = web.create_app({**app.config})        # another server process: a cache of its own
    assignment, report = course_setup["assignment"], tiny_reports["optimized"]
    carol = User(email="carol@example.edu", name="Carol", active=True)   # no nickname
    dan = User(email="dan@example.edu", name="Dan", active=True)         # no nickname
    db.add_all([carol, dan, *(Enrollment(user=u, course=course_setup["course"], role="student") for u in (carol, dan))])
    db.commit()
    store_graded_run(db, course_setup["bob"], assignment, measured(report, 38.0))
    from webtest_helpers import login
    viewer = other_process.test_client()
    assert login(viewer, "bob@example.edu").status_code == 302
    assert ranked_nicknames(viewer.get("/leaderboard/tiny").get_data(as_text=True)) == ["bobby"]   # now cached

    for student, p99 in ((carol, 30.0), (dan, 20.0)):          # graded through the worker's own writes
        queued = store_graded_run(db, student, assignment, measured(report, p99))
        queued.status, queued.report, queued.score_total = "queued", None, None
        db.commit()
        claim = runs.claim(db, queued.id, "test-worker", None, stale_after_s=90)
        assert claim is not None
        assert runs.finish(db, claim, measured(report, p99).to_json(include_seed=False), seed=1)
    page = viewer.get("/leaderboard/tiny").get_data(as_text=True)
    assert ranked_nicknames(page) == [f"student {dan.id}", f"student {carol.id}", "bobby"]
    assert "anonymous" not in page

    carol_client = client_for(None)                        # writes through the first process
    from web import accounts
    accounts.set_password(db.get(User, carol.id), "correct horse battery")
    db.commit()
    assert login(carol_client, "carol@example.edu").status_code == 302
    account = carol_client.get("/account").get_data(as_text=True)
    saved = carol_client.post("/account/nickname", data={"nickname": "carol_c", "csrf_token": csrf_of(account)})
    assert saved.status_code == 303
    assert ranked_nicknames(viewer.get("/leaderboard/tiny").get_data(as_text=True)) == \
        [f"student {dan.id}", "carol_c", "bobby"]


def with_extra_credit(report, points: float):
    """`report` with one more timed test, of extra credit, that earned `points` (the tiny spec
    has none), scored as the grader scores one: the total includes it, the maximum does not."""
    import dataclasses
    perf = next(t for t in report.tests if t.kind == "performance")
    ec = dataclasses.replace(perf, name="ec_tiny", title="tiny extra credit", kind="extra_credit",
                             status="passed", points=points, max_points=points, p99_us=5.0)
    score = dataclasses.replace(report.score, extra_credit=points, total=report.score.total + points,
                                max_extra_credit=points)
    return dataclasses.replace(report, tests=[*report.tests, ec], score=score)


def test_the_total_shows_regular_points_out_of_the_maximum_then_extra_credit(client_for, db, course_setup,
                                                                              tiny_reports):
    """Extra credit comes on top of the maximum: 7.5 regular points and 2 of extra credit read
    "7.5 / 7.5 + 2 EC", not "9.5 / 7.5"; the sum still ranks (the rule the page states)."""
    assignment, base = course_setup["assignment"], tiny_reports["optimized"]
    full = measured(base, 30.0)
    assert full.score.total == full.score.max_total and full.score.extra_credit == 0
    store_graded_run(db, course_setup["alice"], assignment, full)
    store_graded_run(db, course_setup["bob"], assignment, with_extra_credit(measured(base, 38.0), 2.0))
    page = client_for("alice").get("/leaderboard/tiny").get_data(as_text=True)
    assert ranked_nicknames(page) == ["bobby", "alice_k"]                    # 9.5 above 7.5
    top = full.score.max_total
    cells = re.findall(r'<td class="num" data-total="([^"]+)">([^<]+)</td>', page)
    assert cells == [(f"{top + 2:g}", f"{top:g} / {top:g} + 2 EC"), (f"{top:g}", f"{top:g} / {top:g}")], cells
    assert 'title="regular points out of the maximum, then extra credit; their sum ranks">Total</th>' in page
