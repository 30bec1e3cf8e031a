"""The web report says everything the terminal report says, for the same run. Four uploads of the
tiny assignment are graded by a real Celery worker on the test session's PostgreSQL and Redis: one
the static check rejects, one with wrong values, one that passes, and one that spins past the
worker's time budget. For each, the terminal report (grader.render) is taken apart line by line,
and every piece of it (header lines, each test's title, status, points with maximum, p99 and
thresholds with their unit, messages, totals, flags, the slow-kernel pointer, provenance) is
looked for on the page a real browser (Debian's Chromium, driven by Playwright) shows the
student, and on the staff run page."""
from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from service_waits import wait_for_run
from test_browser import CHROMIUM, PAGE_TIMEOUT_MS, SHOTS, free_port
from webtest_helpers import OPTIMIZED, PASSWORD

BUDGET_S = 12       # the worker's grade budget: the spinning kernel meets it, the others (about a second each) are far within

REJECTED = OPTIMIZED + b"\nimport subprocess\nsubprocess.run(['true'])\n"
WRONG = OPTIMIZED.replace(b"for kw in nl.affine_range(K):", b"for kw in nl.affine_range(K - 1):")
SPINNING = (b"import neuronxcc.nki as nki\n\n\n@nki.jit\ndef fused_conv2d_maxpool(X, W, bias, pool_size=1):\n"
            b"    n = 0\n    while True:\n        n += 1\n")


@pytest.fixture
def site(app):
    """The app served over HTTP on a loopback port, in this process."""
    from werkzeug.serving import make_server
    server = make_server("127.0.0.1", free_port(), app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join(30)


@pytest.fixture
def chromium():
    from playwright.sync_api import sync_playwright
    assert Path(CHROMIUM).exists(), "Chromium is missing: apt-get install -y chromium (.ci/run does)"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--disable-dev-shm-usage"])
        yield browser
        browser.close()


def signed_in(browser, base: str, who: str):
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    page = context.new_page()
    page.goto(f"{base}/login")
    page.fill("input[name=email]", f"{who}@example.edu")
    page.fill("input[name=password]", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(re.compile(r"/(account)?$"))
    return page


def shot(page, name: str) -> None:
    """A screenshot for a person to look at (tests/web/screenshots/, ignored by git); the page fits
    a 1280 px laptop window, as every page of the site does."""
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 0, f"{name} ({page.url}) is {overflow} px wider than a 1280 px window"


def norm(text: str) -> str:
    """Whitespace collapsed and none around '/': '2.5 / 2.5' and '2.5/2.5' read the same."""
    return re.sub(r"\s*/\s*", "/", re.sub(r"\s+", " ", text)).strip()


def terminal_parts(text: str) -> dict:
    """The terminal report taken apart: title, header lines, test rows (title, status, points,
    p99, thresholds, message lines), totals, flags, other lines and provenance pairs."""
    lines = text.splitlines()
    table = lines.index(next(line for line in lines if line.startswith("Test ") and "Status" in line))
    header = [line.strip() for line in lines[2:table] if line.strip()]
    end = lines.index("", table)
    rows, row = [], None
    for line in lines[table + 2:end]:
        if line.startswith("      "):                         # a message line under the row above
            row["messages"].append(line.strip())
        elif line.startswith("  "):
            cells = re.split(r"\s{2,}", line.strip())
            title, status, points = cells[:3]
            timing = "  ".join(cells[3:])
            p99 = re.match(r"^(\S+ us(?: \+/-\d+%)?|n/a)", timing)     # with the simulator's band
            thresholds = re.findall(r"(?:opt|rel) (\S+ us|n/a)", timing)
            row = {"title": title, "status": status, "points": points, "p99": p99.group(1) if p99 else "",
                   "thresholds": thresholds, "messages": []}
            rows.append(row)
    rest = lines[end + 1:]
    blank = rest.index("")
    totals = [re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in rest[:blank]]
    flags, others, provenance = [], [], []
    tail = rest[blank + 1:]
    if tail and tail[0] == "Flags":
        stop = tail.index("")
        flags = [line.strip().split(": ", 1) for line in tail[1:stop]]
        tail = tail[stop + 1:]
    blocks = "\n".join(tail).strip().split("\n\n")
    for block in blocks[:-1]:
        others += block.splitlines()
    for line in blocks[-1].splitlines():                       # 'label value' pairs, two spaces apart
        provenance += re.split(r"\s{2,}", line.strip())
    return {"title": lines[0].removeprefix("Grading report: "), "header": header, "rows": rows, "totals": totals,
            "flags": flags, "others": others, "provenance": provenance}


def assert_page_says_the_terminal(page, terminal: str, for_staff: bool) -> None:
    parts = terminal_parts(terminal)
    main = page.locator("main")
    text = norm(main.inner_text())
    assert norm(f"Grading report: {parts['title']}") in text
    shown_header = norm(page.locator("[data-report-header] ul").first.inner_text()) if parts["header"] else ""
    at = 0
    for line in parts["header"]:                                  # every line, in the terminal's order
        found = shown_header.find(norm(line), at)
        assert found >= 0, (line, shown_header[at:])
        at = found + len(norm(line))
    web_rows, errors = {}, {}
    for tr in page.locator("[data-tests] tbody tr").all():
        cells = tr.locator("td").all_inner_texts()
        title = cells[0].strip().splitlines()[0]
        web_rows[title] = [norm(c) for c in cells]     # by title, its first line
        ref = tr.locator("[data-error-ref]")           # an error is shown once, below the table
        if ref.count():
            errors[title] = norm(page.locator(f"[data-error='{ref.get_attribute('data-error-ref')}'] "
                                              "[data-error-text]").inner_text())
    assert [row["title"] for row in parts["rows"]] == list(web_rows)              # the same tests, in order
    for row in parts["rows"]:
        cells = web_rows[row["title"]]
        assert cells[1].split(" ")[0] == row["status"], (cells, row)
        assert cells[2] == row["points"], (cells, row)                       # points with their maximum
        if row["p99"]:
            assert cells[3] == row["p99"], (cells, row)                      # p99 with its unit
        assert [c for c in cells[4:6] if c] == row["thresholds"], (cells, row)   # thresholds with their unit
        shown = errors.get(row["title"], "")
        for message in row["messages"]:
            said = norm(message)
            config, _, rest = said.partition(": ")         # the row names the configuration, the block the rest
            assert said in cells[6] or said in shown or (config in cells[6] and rest in shown), (message, cells, shown)
    for label, value in parts["totals"]:
        tile = norm(page.locator(f"[data-score-part='{label}']").inner_text())
        points, _, rest = value.partition(" ")
        assert norm(points) in tile, (label, value, tile)
        said = rest.strip().strip("()")
        assert norm(said) in tile, (label, said, tile)                      # counts, or what extra credit hides
    flags = norm(page.locator("[data-flags]").inner_text()) if parts["flags"] else ""
    for flag, explanation in parts["flags"]:
        if for_staff:
            assert norm(f"{flag}: {explanation}") in flags
        else:                                # the student reads the same flag in words meant for them
            assert flag.split(":", 1)[0] not in flags and len(flags) > 0
    for line in parts["others"]:                                  # the page sets `commands` as code
        assert norm(line.replace("`", "")) in text, line
    provenance = norm(page.locator("[data-provenance]").inner_text())
    for pair in parts["provenance"]:
        assert norm(pair) in provenance, (pair, provenance)


def test_the_web_report_shows_everything_the_terminal_report_shows(site, chromium, db, course_setup,
                                                                   celery_worker):
    import grader
    from grader import render
    from workers import enqueue
    celery_worker("sim", NKI_GRADE_BUDGET_S=BUDGET_S)
    alice, assignment = course_setup["alice"], course_setup["assignment"]
    uploads = {"rejected": REJECTED, "wrong": WRONG, "passing": OPTIMIZED, "over budget": SPINNING}
    assert WRONG != OPTIMIZED
    queued = {kind: enqueue.submit(db, alice, assignment, "conv2d.py", data).id for kind, data in uploads.items()}
    student, staff = signed_in(chromium, site, "alice"), signed_in(chromium, site, "tara")
    seen = {}
    for kind, run_id in queued.items():
        run = wait_for_run(db, run_id, ("done",), timeout=BUDGET_S + 300)
        view = grader.view_of(grader.Report.from_json(run.report))
        terminal = render.render_terminal(view)
        seen[kind] = view
        for page, url, for_staff in ((student, f"{site}/runs/{run_id}/report", False),
                                     (staff, f"{site}/staff/runs/{run_id}", True)):
            page.goto(url)
            shot(page, f"report-{kind.replace(' ', '-')}-{'staff' if for_staff else 'student'}")
            assert_page_says_the_terminal(page, terminal, for_staff)
            if kind == "passing":       # the tiny spec's platform is trn2: its generation's model timed it
                assert ("timed on the Trainium2 (NeuronCore-v3) model"
                        in norm(page.locator("[data-provenance]").inner_text()))
    # each upload is the case it stands for
    assert seen["rejected"].header.rejections and "precheck_rejected" in [f.code for f in seen["rejected"].flags]
    assert all(t.message.startswith("not run: its file was rejected") for t in seen["rejected"].tests)
    assert seen["wrong"].tests[0].status == "failed" and seen["wrong"].points.total == 0
    assert seen["passing"].points.total == seen["passing"].points.max_total and seen["passing"].slow_hint
    assert seen["passing"].provenance.timed_on == "the Trainium2 (NeuronCore-v3) model"
    assert seen["rejected"].provenance.timed_on == ""               # nothing ran, so nothing was timed
    assert seen["over budget"].header.budget.startswith(f"Time budget ({BUDGET_S} s):")
    assert seen["over budget"].points.total == 0
