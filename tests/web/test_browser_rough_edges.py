"""Issue 46's rough edges in a real browser (Debian's Chromium driven by Playwright) at 1280 px,
against the app served in this process (test_browser_report.py's fixtures): a fresh site's
course-first guidance and the create form's title and worker warning; a kernel error shown
once, wrapped, on a page no wider than the window; the leaderboard's graded columns in view; the
starter download; the regrade's confirmation and its mark in the history; and the timeline
picture's text measured inside the picture."""
from __future__ import annotations

import re

from test_browser_report import chromium, shot, signed_in, site  # noqa: F401  (fixtures)
from test_rough_edges import BROKEN, broken_report, lone_admin
from webtest_helpers import ROOT, store_graded_run

import grader


def test_a_fresh_site_leads_to_a_course_then_an_assignment_with_its_own_title(site, chromium, db):
    lone_admin(db)
    page = signed_in(chromium, site, "root")
    page.goto(f"{site}/staff/")
    assert page.is_visible("[data-no-course]")                  # shown open: nothing else to do there yet
    shot(page, "rough-fresh-console")
    page.click("[data-create-course-first]")
    page.wait_for_url(re.compile(r"create=course"))
    page.fill("#course_name", "CS149")                          # the course form is open, ready
    page.click("input[type=submit][value='Create course']")
    page.wait_for_selector("text=Course CS149 created")
    page.click("summary:has-text('Create an assignment')")
    default = grader.load_spec("asst4-trainium2").title
    assert page.input_value("#title") == default                # the spec's title, to change
    page.select_option("select[name=spec]", "asst4-trainium")
    assert page.input_value("#title") == grader.load_spec("asst4-trainium").title    # follows the spec
    page.fill("#title", "Fall 2026: fused conv2d")
    page.select_option("select[name=spec]", "asst4-trainium2")
    assert page.input_value("#title") == "Fall 2026: fused conv2d"                   # typed: kept
    page.select_option("select[name=backend]", "neuron")        # no worker alive for either backend here
    assert page.is_visible("[data-no-worker-for=neuron]") and page.is_hidden("[data-no-worker-for=sim]")
    page.select_option("select[name=backend]", "sim")
    assert page.is_visible("[data-no-worker-for=sim]") and page.is_hidden("[data-no-worker-for=neuron]")
    shot(page, "rough-create-form")
    page.select_option("#course", "CS149")
    page.fill("#name", "asst4")
    page.click("input[type=submit][value='Create assignment']")
    page.wait_for_url(re.compile(r"/staff/assignments/asst4$"))
    assert page.inner_text("h1").startswith("Fall 2026: fused conv2d")
    assert "No worker alive serves the sim queue" in page.inner_text("[data-no-worker]")
    shot(page, "rough-assignment-created")


def test_the_students_pages_and_the_regrade_in_a_browser(site, chromium, db, course_setup, tiny_reports,
                                                          tmp_path):
    from sqlalchemy import func, select
    from store import specs
    from store.models import StaffTask
    from workers import staff_tasks
    asst4 = specs.new_assignment(db, "asst4-trainium2", course=course_setup["course"], name="asst4", backend="sim")
    db.commit()
    broken = store_graded_run(db, course_setup["alice"], asst4, broken_report(), data=BROKEN)
    student = signed_in(chromium, site, "alice")

    # a kernel error: once, its lines kept and wrapped, naming the four tests; the page fits 1280 px
    student.goto(f"{site}/runs/{broken.id}/report")
    assert student.locator("[data-error]").count() == 1
    assert student.locator("[data-error-ref]").count() == 4
    block = student.locator("[data-error-text]")
    assert "\n  at conv2d.py:7\n" in block.inner_text()
    assert block.evaluate("e => getComputedStyle(e).whiteSpace") == "pre-wrap"
    assert student.locator("[data-error-tests] li").count() == 4
    shot(student, "rough-kernel-error")

    # the leaderboard's graded columns are in the window, before extra credit
    student.goto(f"{site}/leaderboard/asst4")
    first = student.locator("table[data-leaderboard] thead tr:nth-child(2) th").first
    assert first.get_attribute("title").startswith("Performance")
    box = first.bounding_box()
    assert box["x"] + box["width"] <= 1280
    shot(student, "rough-leaderboard")

    # the starter file downloads as handed out
    student.goto(f"{site}/a/tiny")
    with student.expect_download() as got:
        student.click("[data-starters] a:has-text('conv2d.py')")
    path = tmp_path / "conv2d.py"
    got.value.save_as(path)
    assert path.read_bytes() == (ROOT / "student_template" / "conv2d.py").read_bytes()

    # a TA's regrade asks first; cancelled, nothing starts; confirmed, the new run is marked
    store_graded_run(db, course_setup["alice"], course_setup["assignment"], tiny_reports["optimized"])
    ta = signed_in(chromium, site, "tara")
    ta.goto(f"{site}/staff/assignments/tiny")
    ta.click("button:has-text('Regrade every student')")
    ta.wait_for_selector("[data-confirm-regrade]")
    assert "each of 1 student again" in ta.inner_text("[data-confirm-regrade]")
    shot(ta, "rough-regrade-confirm")
    ta.click("text=Cancel: queue nothing")
    ta.wait_for_url(re.compile(r"/staff/assignments/tiny$"))
    assert db.scalar(select(func.count()).select_from(StaffTask)) == 0
    ta.click("button:has-text('Regrade every student')")
    ta.click("button:has-text('Regrade 1 student')")
    ta.wait_for_url(re.compile(r"/staff/tasks/\d+$"))
    # no staff worker is alive: the page says the task waits for one, until a worker has taken it
    assert "No worker alive serves the staff queue" in ta.inner_text("[data-no-worker]")
    staff_tasks.run(int(ta.url.rsplit("/", 1)[1]))                # the staff worker's own code, here
    ta.wait_for_selector("[data-field=status]:has-text('done')")
    ta.wait_for_selector("[data-no-worker]", state="detached")
    student.goto(f"{site}/a/tiny")
    rows = student.locator("[data-history] tbody tr")
    assert rows.count() == 2
    assert "regrade" in rows.nth(0).inner_text() and "regrade" not in rows.nth(1).inner_text()
    shot(student, "rough-history-regrade")


def test_the_timeline_pictures_text_fits_it_as_a_browser_draws_it(chromium, tmp_path, capsys):
    from nkisim.cli import main
    svg = tmp_path / "t.svg"
    assert main(["profile", "reference_kernels/conv2d_relaxed.py", "--preset", "conv2d-32x16-float16-pool1",
                 "--svg", str(svg)]) == 0
    page = chromium.new_page(viewport={"width": 1500, "height": 900})
    page.set_content(f"<html><body style='margin:0'>{svg.read_text()}</body></html>")
    overflow = page.evaluate("""() => {
        const svg = document.querySelector("svg"), width = svg.width.baseVal.value;
        return [...svg.querySelectorAll("text")].map(t => t.getBBox()).filter(b => b.x + b.width > width)
            .map(b => b.x + b.width - width);
    }""")
    assert overflow == [], f"text past the picture's right edge by {overflow} px"
    verdict = page.locator("text[data-verdict]")
    assert verdict.evaluate("t => t.getBBox().width") > 600 and verdict.locator("tspan").count() >= 2
    page.close()
