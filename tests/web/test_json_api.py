"""The JSON API: bearer tokens, submit, status, report (never the seed), leaderboard, and one
error shape {"error", "remedy"}."""
from __future__ import annotations

import io

from sqlalchemy import func, select

from store.models import GradingRun, Submission

from webtest_helpers import OPTIMIZED, measured, store_graded_run


def token_for(db, user) -> dict:
    from web.accounts import new_api_token
    token = new_api_token(db, user, "test")
    db.commit()
    return {"Authorization": f"Bearer {token}"}


def test_tokens_are_required_and_checked(app, course_setup):
    client = app.test_client()
    missing = client.get("/api/v1/runs/1")
    assert missing.status_code == 401 and set(missing.get_json()) == {"error", "remedy"}
    wrong = client.get("/api/v1/runs/1", headers={"Authorization": "Bearer nkig_wrong"})
    assert wrong.status_code == 401 and "unknown or revoked" in wrong.get_json()["error"]


def test_submit_status_report_and_leaderboard(app, db, course_setup, tiny_reports):
    client = app.test_client()
    alice = token_for(db, course_setup["alice"])
    created = client.post("/api/v1/assignments/tiny/submissions", headers=alice,
                          data={"file": (io.BytesIO(OPTIMIZED), "conv2d.py")})
    assert created.status_code == 201
    body = created.get_json()
    assert body["status"] == "queued" and body["queue_position"] == 1
    assert body["status_url"].endswith(f"/api/v1/runs/{body['run_id']}")
    status = client.get(f"/api/v1/runs/{body['run_id']}", headers=alice).get_json()
    assert status["status"] == "queued" and status["total"] == 0
    assert client.get(f"/api/v1/runs/{body['run_id']}/report", headers=alice).status_code == 409
    graded = store_graded_run(db, course_setup["alice"], course_setup["assignment"],
                              measured(tiny_reports["optimized"], 30.0))
    report = client.get(f"/api/v1/runs/{graded.id}/report", headers=alice).get_json()
    assert report["score"]["total"] == 7.5 and "seed" not in report
    bob = token_for(db, course_setup["bob"])
    assert client.get(f"/api/v1/runs/{graded.id}/report", headers=bob).status_code == 404
    assert client.get(f"/api/v1/runs/{graded.id}", headers=bob).status_code == 404
    rows = client.get("/api/v1/assignments/tiny/leaderboard", headers=bob).get_json()["rows"]
    assert [(r["rank"], r["nickname"], r["total"], r["extra_credit"]) for r in rows] == [(1, "alice_k", 7.5, 0.0)]
    assert rows[0]["run_id"] is None                          # others' run ids stay private


def test_bad_upload_through_the_api_stores_nothing(app, db, course_setup):
    client = app.test_client()
    alice = token_for(db, course_setup["alice"])
    wrong = client.post("/api/v1/assignments/tiny/submissions", headers=alice,
                        data={"file": (io.BytesIO(b"x = (\n"), "conv2d.py")})
    assert wrong.status_code == 400
    said = wrong.get_json()
    assert set(said) == {"error", "remedy"}
    assert said["error"].startswith("conv2d.py has a syntax error on line 1:"), said
    assert "python -m py_compile conv2d.py" in said["remedy"]
    no_file = client.post("/api/v1/assignments/tiny/submissions", headers=alice, data={})
    assert no_file.status_code == 400 and "multipart field 'file'" in no_file.get_json()["remedy"]
    unknown = client.post("/api/v1/assignments/nope/submissions", headers=alice,
                          data={"file": (io.BytesIO(OPTIMIZED), "conv2d.py")})
    assert unknown.status_code == 404
    db.expire_all()
    assert db.scalar(select(func.count()).select_from(Submission)) == 0
    assert db.scalar(select(func.count()).select_from(GradingRun)) == 0
