"""An API upload looks its bearer token up once: the upload limit's key and the view's
authentication share the one lookup (each lookup is a query, and may write last_used_at)."""
from __future__ import annotations

import io

from sqlalchemy import event

from webtest_helpers import OPTIMIZED


def test_an_api_upload_reads_its_token_once(app, db, course_setup):
    from web import db as web_db
    from web.accounts import new_api_token
    token = new_api_token(db, course_setup["alice"], "test")
    db.commit()
    with app.app_context():
        engine = web_db.factory().kw["bind"]
    token_reads = []

    def seen(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("SELECT") and "FROM api_tokens" in statement:
            token_reads.append(statement)
    event.listen(engine, "before_cursor_execute", seen)
    try:
        created = app.test_client().post("/api/v1/assignments/tiny/submissions",
                                         headers={"Authorization": f"Bearer {token}"},
                                         data={"file": (io.BytesIO(OPTIMIZED), "conv2d.py")})
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert created.status_code == 201, created.get_json()
    assert len(token_reads) == 1, token_reads
