"""Contest mode (issue 45 item 5): the attacks first (real grades of our own cheating kernels on
a small contest spec, stored as the worker stores them), then the board's rule, the code reveal,
disqualification, the best-over-time chart and the staff's settings."""
from __future__ import annotations

import datetime as dt
import re

import pytest

from contest_kernels import KERNELS
from webtest_helpers import ROOT, csrf_of, store_graded_run

CONTEST_SPEC = ROOT / "tests" / "web" / "specs" / "contest.toml"
NOW = dt.datetime.now(dt.timezone.utc)


@pytest.fixture(scope="session")
def contest_reports():
    """The real grader's reports of every kernel of contest_kernels on the contest spec."""
    import grader
    spec = grader.load_spec(str(CONTEST_SPEC))
    return {key: grader.grade(grader.submission_from_bytes("conv2d.py", source.encode(), spec), spec,
                              grader.GradeOptions(backend="sim", seed=11))
            for key, source in KERNELS.items()}


@pytest.fixture
def contest(db, course_setup):
    from store import specs
    assignment = specs.new_assignment(db, str(CONTEST_SPEC), course=course_setup["course"], name="cup",
                                      backend="sim", runs_per_hour=10)
    assignment.mode, assignment.contest_ends_at = "contest", NOW + dt.timedelta(days=1)
    db.add(assignment)
    db.commit()
    return assignment


def stored(db, user, assignment, report, key, minutes_ago):
    return store_graded_run(db, user, assignment, report, data=KERNELS[key].encode(),
                            finished_at=NOW - dt.timedelta(minutes=minutes_ago))


def board_of(db, assignment):
    from store import contest as contest_standings
    db.expire_all()
    return contest_standings.compute(db, assignment, "sim")


# ----- attacks: none of these ranks -------------------------------------------------------------

@pytest.mark.parametrize("cheat, why", [
    ("distinguishing", "not measured: bench_tall"),        # its timed output is checked and wrong
    ("low_precision", "correctness not passed: conv_small"),   # the downgrade check
    ("unwritten", "not measured: bench_tall"),              # an unwritten output is never an earlier one
])
def test_a_cheating_kernel_is_not_ranked(db, course_setup, contest, contest_reports, cheat, why):
    from store import contest as contest_standings
    run = stored(db, course_setup["alice"], contest, contest_reports[cheat], cheat, 5)
    judged = {r.run_id: r for r in contest_standings.contest_runs(db, contest, "sim")}
    assert judged[run.id].score_us is None and judged[run.id].why.startswith(why), judged[run.id]
    assert board_of(db, contest).entries == []


def test_the_cheats_are_caught_by_the_graders_checks(contest_reports):
    tests = {k: {t.name: t for t in r.tests} for k, r in contest_reports.items()}
    # it passes correctness, and does less work only when timed: its timed output is checked too
    assert tests["distinguishing"]["conv_small"].status == "passed"
    assert "performance run output is wrong" in tests["distinguishing"]["bench_tall"].message
    # the tolerance alone would let it through; the downgrade check does not
    assert "computed at float16 precision" in tests["low_precision"]["conv_small"].message
    assert "err_tensor_output_not_written_to" in tests["unwritten"]["bench_tall"].message


def test_a_replaying_kernel_gains_nothing(db, course_setup, contest, contest_reports):
    """Its module-global cache is never hit: each configuration is traced in a fresh process, so it
    does all the work every time and scores exactly what the honest kernel scores."""
    honest = stored(db, course_setup["bob"], contest, contest_reports["honest"], "honest", 10)
    replay = stored(db, course_setup["alice"], contest, contest_reports["replay"], "replay", 5)
    board = board_of(db, contest)
    scores = {e.run.run_id: e.run.score_us for e in board.entries}
    assert scores[replay.id] == scores[honest.id]
    assert [e.run.run_id for e in board.entries] == [honest.id, replay.id]     # the tie: earlier first


# ----- the rule ---------------------------------------------------------------------------------

def test_the_board_ranks_by_the_geometric_mean_best_run_each(db, course_setup, contest, contest_reports, client_for):
    alice, bob = course_setup["alice"], course_setup["bob"]
    slow = stored(db, alice, contest, contest_reports["honest"], "honest", 30)
    fast = stored(db, bob, contest, contest_reports["faster"], "faster", 20)
    better = stored(db, alice, contest, contest_reports["faster"], "faster", 10)
    board = board_of(db, contest)
    p99s = {t.name: t.p99_us for t in contest_reports["faster"].tests if t.p99_us}
    assert [(e.user_id, e.run.run_id) for e in board.entries] == [(bob.id, fast.id), (alice.id, better.id)]
    assert board.entries[0].run.score_us == pytest.approx((p99s["bench_same"] * p99s["bench_tall"]) ** 0.5)
    assert slow.id not in {e.run.run_id for e in board.entries}
    html = client_for("alice").get("/leaderboard/cup").get_data(as_text=True)
    assert "geometric mean" in html and "KernelBot" in html          # the rule on the board itself
    assert html.index("bobby") < html.index("alice_k")


def test_a_run_after_the_end_is_not_ranked(db, course_setup, contest, contest_reports):
    contest.contest_ends_at = NOW - dt.timedelta(minutes=1)
    db.commit()
    stored(db, course_setup["alice"], contest, contest_reports["faster"], "faster", 0)
    assert board_of(db, contest).entries == []


# ----- code reveal ------------------------------------------------------------------------------

def test_code_is_hidden_from_other_participants_until_the_end(db, course_setup, contest, contest_reports, client_for):
    run = stored(db, course_setup["alice"], contest, contest_reports["faster"], "faster", 5)
    url = f"/leaderboard/cup/runs/{run.id}/code"
    bob = client_for("bob")
    refused = bob.get(url)
    assert refused.status_code == 403 and KERNELS["faster"][:200] not in refused.get_data(as_text=True)
    assert "hidden until the contest ends" in refused.get_data(as_text=True)
    assert "hidden until the end" in bob.get("/leaderboard/cup").get_data(as_text=True)
    assert client_for("alice").get(url).get_data(as_text=True) == KERNELS["faster"]      # her own
    assert client_for("tara").get(url).status_code == 200                               # staff
    assert client_for(None).get(url).status_code in (302, 401)                          # nobody signed in
    contest.contest_ends_at = dt.datetime.now(dt.timezone.utc)        # after her upload: it ranks
    db.commit()
    assert bob.get(url).get_data(as_text=True) == KERNELS["faster"]
    assert f'href="{url}"' in bob.get("/leaderboard/cup").get_data(as_text=True)


def test_after_the_end_an_unranked_runs_code_stays_private(db, course_setup, contest, contest_reports, client_for):
    cheat = stored(db, course_setup["alice"], contest, contest_reports["distinguishing"], "distinguishing", 5)
    contest.contest_ends_at = dt.datetime.now(dt.timezone.utc)        # ended, after its upload
    db.commit()
    assert client_for("bob").get(f"/leaderboard/cup/runs/{cheat.id}/code").status_code == 404


# ----- disqualification -------------------------------------------------------------------------

def test_staff_disqualify_a_run_and_the_board_says_why(db, course_setup, contest, contest_reports, client_for):
    alice, bob = course_setup["alice"], course_setup["bob"]
    run = stored(db, alice, contest, contest_reports["faster"], "faster", 5)
    stored(db, bob, contest, contest_reports["honest"], "honest", 5)
    tara = client_for("tara")
    token = csrf_of(tara.get("/leaderboard/cup").get_data(as_text=True))
    bob_client = client_for("bob")
    bob_token = csrf_of(bob_client.get("/leaderboard/cup").get_data(as_text=True))
    assert bob_client.post(f"/leaderboard/cup/runs/{run.id}/disqualify",
                           data={"csrf_token": bob_token, "reason": "x"}).status_code == 403
    assert tara.post(f"/leaderboard/cup/runs/{run.id}/disqualify",
                     data={"csrf_token": token, "reason": ""}).status_code == 400
    done = tara.post(f"/leaderboard/cup/runs/{run.id}/disqualify",
                     data={"csrf_token": token, "reason": "shared code with another team"})
    assert done.status_code == 303
    board = board_of(db, contest)
    assert [e.user_id for e in board.entries] == [bob.id]
    assert [(d.user_id, d.reason) for d in board.disqualified] == [(alice.id, "shared code with another team")]
    html = client_for("bob").get("/leaderboard/cup").get_data(as_text=True)
    assert re.search(r"alice_k <strong>disqualified</strong>", html) and "shared code with another team" in html
    tara.post(f"/leaderboard/cup/runs/{run.id}/disqualify", data={"csrf_token": token, "lift": "yes"})
    assert [e.user_id for e in board_of(db, contest).entries] == [alice.id, bob.id]


# ----- chart and settings -----------------------------------------------------------------------

def test_a_participants_best_over_time_chart(db, course_setup, contest, contest_reports, client_for):
    alice = course_setup["alice"]
    stored(db, alice, contest, contest_reports["honest"], "honest", 30)
    stored(db, alice, contest, contest_reports["distinguishing"], "distinguishing", 20)
    stored(db, alice, contest, contest_reports["faster"], "faster", 10)
    html = client_for("bob").get(f"/leaderboard/cup/participants/{alice.id}").get_data(as_text=True)
    chart = html[html.index("<svg"):html.index("</svg>")]
    assert chart.count('class="point"') == 2            # the two improvements; the cheat is no point
    assert "correctness not passed" not in html and "not measured" not in html     # others see ranked runs only
    assert "not measured: bench_tall" in client_for("alice").get(
        f"/leaderboard/cup/participants/{alice.id}").get_data(as_text=True)


def test_staff_make_an_assignment_a_contest(db, course_setup, client_for):
    tara = client_for("tara")
    page = tara.get("/staff/assignments/tiny").get_data(as_text=True)
    assert "data-contest-form" in page
    token = csrf_of(page)
    bad = tara.post("/leaderboard/tiny/contest", data={"csrf_token": token, "mode": "contest", "contest_ends_at": ""})
    assert bad.status_code == 400 and "needs an end time" in bad.get_data(as_text=True)
    ok = tara.post("/leaderboard/tiny/contest",
                   data={"csrf_token": token, "mode": "contest", "contest_ends_at": "2030-01-02 03:04"})
    assert ok.status_code == 303
    db.expire_all()
    a = course_setup["assignment"]
    assert a.mode == "contest" and a.contest_ends_at == dt.datetime(2030, 1, 2, 3, 4, tzinfo=dt.timezone.utc)
    assert "Contest:" in tara.get("/leaderboard/tiny").get_data(as_text=True)
    alice = client_for("alice")
    alice_token = csrf_of(alice.get("/leaderboard/tiny").get_data(as_text=True))
    assert alice.post("/leaderboard/tiny/contest", data={"csrf_token": alice_token, "mode": "course"}
                      ).status_code == 403
