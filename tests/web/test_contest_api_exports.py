"""A contest through the JSON API and in the grade exports (issue 45): the attacks first (what the
API could show that the board hides: code before the end, a rank for a disqualified or cheating
run), then the API's board against the board's own, and the exports' contest columns. The
contest, its real reports and its kernels are tests/web/test_contest.py's."""
from __future__ import annotations

import csv
import datetime as dt
import io
import json
import zipfile

import pytest

from contest_kernels import KERNELS
from test_contest import board_of, contest, contest_reports, stored  # noqa: F401  (fixtures)
from test_json_api import token_for
from webtest_helpers import csrf_of, export_in_process


def api_board(app, db, who, backend=None):
    query = f"?backend={backend}" if backend else ""
    response = app.test_client().get(f"/api/v1/assignments/cup/leaderboard{query}", headers=token_for(db, who))
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def api_code(app, db, who, run_id):
    return app.test_client().get(f"/api/v1/assignments/cup/runs/{run_id}/code", headers=token_for(db, who))


def end_now(db, contest):
    contest.contest_ends_at = dt.datetime.now(dt.timezone.utc)       # after every stored upload
    db.commit()


# ----- attacks: what the board hides, the API hides ----------------------------------------------

def test_the_api_shows_no_code_of_others_before_the_end(app, db, course_setup, contest, contest_reports):
    alice, bob = course_setup["alice"], course_setup["bob"]
    run = stored(db, alice, contest, contest_reports["faster"], "faster", 5)
    body = api_board(app, db, bob)
    assert json.dumps(body).count(KERNELS["faster"][:80]) == 0
    [row] = body["rows"]
    assert row["code_url"] is None and row["run_id"] is None          # nothing that leads to her code
    refused = api_code(app, db, bob, run.id)
    assert refused.status_code == 403 and set(refused.get_json()) == {"error", "remedy"}
    assert "hidden until the contest ends" in refused.get_json()["error"]
    assert KERNELS["faster"][:200] not in refused.get_data(as_text=True)
    # her own, and the staff, as on the board
    assert api_code(app, db, alice, run.id).get_data(as_text=True) == KERNELS["faster"]
    assert api_code(app, db, course_setup["tara"], run.id).status_code == 200
    assert api_board(app, db, alice)["rows"][0]["code_url"].endswith(f"/api/v1/assignments/cup/runs/{run.id}/code")


def test_after_the_end_the_api_reveals_only_what_the_board_reveals(app, db, course_setup, contest, contest_reports):
    alice, bob = course_setup["alice"], course_setup["bob"]
    ranked = stored(db, alice, contest, contest_reports["faster"], "faster", 10)
    cheat = stored(db, alice, contest, contest_reports["distinguishing"], "distinguishing", 5)
    end_now(db, contest)
    [row] = api_board(app, db, bob)["rows"]
    assert row["run_id"] == ranked.id
    code = app.test_client().get(row["code_url"], headers=token_for(db, bob))
    assert code.status_code == 200 and code.get_data(as_text=True) == KERNELS["faster"]
    hidden = api_code(app, db, bob, cheat.id)                          # not ranked: stays private
    assert hidden.status_code == 404 and KERNELS["distinguishing"][:200] not in hidden.get_data(as_text=True)
    # nor does the report route open another participant's run, ended or not
    assert app.test_client().get(f"/api/v1/runs/{ranked.id}/report", headers=token_for(db, bob)).status_code == 404


def test_a_disqualified_run_has_no_rank_through_the_api(app, db, course_setup, contest, contest_reports, client_for):
    alice, bob = course_setup["alice"], course_setup["bob"]
    fast = stored(db, alice, contest, contest_reports["faster"], "faster", 5)
    stored(db, bob, contest, contest_reports["honest"], "honest", 5)
    tara = client_for("tara")
    token = csrf_of(tara.get("/leaderboard/cup").get_data(as_text=True))
    assert tara.post(f"/leaderboard/cup/runs/{fast.id}/disqualify",
                     data={"csrf_token": token, "reason": "timed calls told apart"}).status_code == 303
    body = api_board(app, db, bob)
    assert [(r["rank"], r["nickname"]) for r in body["rows"]] == [(1, "bobby")]       # the course rule would rank her first
    assert [(d["nickname"], d["reason"]) for d in body["disqualified"]] == [("alice_k", "timed calls told apart")]
    assert "rank" not in body["disqualified"][0] and "score_us" not in body["disqualified"][0]
    end_now(db, contest)                                              # nor her code after the end
    assert api_code(app, db, bob, fast.id).status_code == 404


@pytest.mark.parametrize("cheat", ["distinguishing", "low_precision", "unwritten"])
def test_a_cheating_kernel_has_no_rank_through_the_api(app, db, course_setup, contest, contest_reports, cheat):
    stored(db, course_setup["alice"], contest, contest_reports[cheat], cheat, 5)
    assert api_board(app, db, course_setup["bob"])["rows"] == []


def test_the_api_code_route_is_for_contests_only(app, db, course_setup, tiny_reports):
    from webtest_helpers import measured, store_graded_run
    run = store_graded_run(db, course_setup["alice"], course_setup["assignment"], measured(tiny_reports["optimized"], 30.0))
    response = app.test_client().get(f"/api/v1/assignments/tiny/runs/{run.id}/code",
                                     headers=token_for(db, course_setup["alice"]))
    assert response.status_code == 404 and "not a contest" in response.get_json()["error"]


# ----- the rule: the board's, through the API ----------------------------------------------------

def test_the_api_ranks_as_the_board_does(app, db, course_setup, contest, contest_reports):
    alice, bob = course_setup["alice"], course_setup["bob"]
    stored(db, alice, contest, contest_reports["honest"], "honest", 30)
    stored(db, bob, contest, contest_reports["faster"], "faster", 20)
    stored(db, alice, contest, contest_reports["faster"], "faster", 10)
    body = api_board(app, db, bob)
    board = board_of(db, contest)
    assert body["mode"] == "contest" and "geometric mean" in body["rule"] and body["ended"] is False
    assert body["benchmarks"] == [t.name for t in board.benchmarks]
    assert [(r["rank"], r["nickname"], r["score_us"]) for r in body["rows"]] == [
        (e.rank, {alice.id: "alice_k", bob.id: "bobby"}[e.user_id], pytest.approx(e.run.score_us)) for e in board.entries]
    assert body["rows"][0]["p99_us"] == pytest.approx(board.entries[0].run.p99s)
    assert body["rows"][0]["score_us"] == pytest.approx(
        (body["rows"][0]["p99_us"]["bench_same"] * body["rows"][0]["p99_us"]["bench_tall"]) ** 0.5)
    assert [r["run_id"] is not None for r in body["rows"]] == [True, False]      # bob's own only
    unknown = app.test_client().get("/api/v1/assignments/cup/leaderboard?backend=gpu", headers=token_for(db, bob))
    assert unknown.status_code == 400 and set(unknown.get_json()) == {"error", "remedy"}


def test_a_course_assignment_says_its_mode(app, db, course_setup):
    response = app.test_client().get("/api/v1/assignments/tiny/leaderboard", headers=token_for(db, course_setup["bob"]))
    assert response.get_json()["mode"] == "course"


# ----- exports ----------------------------------------------------------------------------------

def test_the_grades_csv_carries_the_contests_rank_score_and_disqualification(
        db, course_setup, contest, contest_reports, client_for):
    alice, bob = course_setup["alice"], course_setup["bob"]
    fast = stored(db, alice, contest, contest_reports["faster"], "faster", 5)
    honest = stored(db, bob, contest, contest_reports["honest"], "honest", 5)
    tara = client_for("tara")
    rows = {r["email"]: r for r in csv.DictReader(io.StringIO(export_in_process(tara, "cup", "grades_csv").decode()))}
    board = {e.run.run_id: e for e in board_of(db, contest).entries}
    assert (rows["alice@example.edu"]["contest_rank"], rows["bob@example.edu"]["contest_rank"]) == ("1", "2")
    assert float(rows["alice@example.edu"]["contest_score_us"]) == pytest.approx(board[fast.id].run.score_us, abs=1e-3)
    assert rows["bob@example.edu"]["contest_run_id"] == str(honest.id)
    assert rows["alice@example.edu"]["disqualified"] == ""
    token = csrf_of(tara.get("/leaderboard/cup").get_data(as_text=True))
    tara.post(f"/leaderboard/cup/runs/{fast.id}/disqualify", data={"csrf_token": token, "reason": "copied kernel"})
    rows = {r["email"]: r for r in csv.DictReader(io.StringIO(export_in_process(tara, "cup", "grades_csv").decode()))}
    assert rows["alice@example.edu"]["contest_rank"] == "" and rows["alice@example.edu"]["contest_score_us"] == ""
    assert rows["alice@example.edu"]["disqualified"] == f"run {fast.id}: copied kernel"
    assert rows["bob@example.edu"]["contest_rank"] == "1"
    course = {r["email"]: r for r in csv.DictReader(io.StringIO(export_in_process(tara, "tiny", "grades_csv").decode()))}
    assert "contest_rank" not in course["alice@example.edu"]          # a course assignment has no contest columns


def test_the_gradescope_export_carries_the_contest(db, course_setup, contest, contest_reports, client_for):
    alice, bob = course_setup["alice"], course_setup["bob"]
    fast = stored(db, alice, contest, contest_reports["faster"], "faster", 5)
    stored(db, bob, contest, contest_reports["honest"], "honest", 5)
    tara = client_for("tara")
    token = csrf_of(tara.get("/leaderboard/cup").get_data(as_text=True))
    tara.post(f"/leaderboard/cup/runs/{fast.id}/disqualify", data={"csrf_token": token, "reason": "copied kernel"})
    archive = zipfile.ZipFile(io.BytesIO(export_in_process(tara, "cup", "gradescope_zip")))
    bob_results = json.loads(archive.read("bob@example.edu/results.json"))
    alice_results = json.loads(archive.read("alice@example.edu/results.json"))
    score = board_of(db, contest).entries[0].run.score_us
    assert bob_results["extra_data"]["contest"] == {"rank": 1, "score_us": pytest.approx(score), "run_id":
                                                    bob_results["extra_data"]["run_id"], "disqualified": None}
    assert "Contest rank 1" in bob_results["output"]
    assert alice_results["extra_data"]["contest"]["rank"] is None
    assert alice_results["extra_data"]["contest"]["disqualified"] == f"run {fast.id}: copied kernel"
    assert "Disqualified from the contest" in alice_results["output"] and "copied kernel" in alice_results["output"]
