"""`grader admin-link`: a fresh one-time sign-in link for the first admin, made as `grader serve`
makes the one it prints at every start (web/bootstrap.py; the admin is created on first use).
For a deployment serve does not run: under Docker Compose,

    docker compose exec web grader admin-link --url https://grader.example.edu
"""
from __future__ import annotations

import os
import sys

DEFAULT_URL = "http://127.0.0.1:8000"


def register(sub) -> None:
    p = sub.add_parser("admin-link", help="print a one-time sign-in link for the first admin (created if none)")
    p.add_argument("--url", help="the address people open the site at, e.g. https://grader.example.edu (default "
                                 "$NKI_GRADER_URL, else the URL of the serve of this instance, else "
                                 f"{DEFAULT_URL})")
    p.set_defaults(func=admin_link)


def admin_link(args) -> int:
    from store import session_scope, upgrade
    from store.instance import serve_holder
    from web.bootstrap import LINK_HOURS, first_admin_login_link
    from workers.cli import talk_to_existing_instance
    found = talk_to_existing_instance()
    if found is None:
        return 2
    holder = serve_holder(found.folder) if found.folder is not None else None
    url = args.url or os.environ.get("NKI_GRADER_URL") or (holder.url if holder and holder.url else DEFAULT_URL)
    if not url.startswith(("http://", "https://")):
        print(f"grader: --url {url!r}: give the site's address with its scheme, e.g. https://grader.example.edu",
              file=sys.stderr)
        return 2
    upgrade()
    with session_scope() as s:
        link = first_admin_login_link(s, url)
    print(f"First admin sign-in (one-time link, valid {LINK_HOURS} hours; a newer link revokes it): {link}")
    return 0
