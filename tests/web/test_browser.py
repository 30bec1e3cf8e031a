"""The site in a real browser (Debian's Chromium driven by Playwright) against the service as
`grader serve` starts it: gunicorn, a Celery worker and beat on the test session's real
PostgreSQL and Redis. Every visited page is saved as a screenshot in tests/web/screenshots/
(git ignores it) for a person to look at.

One story, in order: the admin signs in with the link `grader serve` prints, creates the
asst4 assignment and imports a roster; a student signs in with their one-time link, drops the
optimized reference on the upload form, watches it go from queued to graded, and reads the
report (chart and engine timeline); three students' runs on a small assignment are ranked on
the leaderboard; a TA adopts a new thresholds version and rescores."""
from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from webtest_helpers import OPTIMIZED, RELAXED, ROOT, TINY_SPEC

CHROMIUM = "/usr/bin/chromium"
SHOTS = Path(__file__).resolve().parent / "screenshots"
TEMPLATE = (ROOT / "student_template" / "conv2d.py").read_bytes()
GRADE_TIMEOUT_MS = 15 * 60 * 1000        # the full asst4 spec on a busy 2-core machine
PAGE_TIMEOUT_MS = 60 * 1000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """`grader serve` as a user runs it; its output is kept, the admin link read from it."""

    def __init__(self, home: Path, port: int):
        self.lines: list[str] = []
        self.link_seen = threading.Event()
        env = dict(os.environ, NKI_GRADER_HOME=str(home), PYTHONUNBUFFERED="1")
        self.process = subprocess.Popen([str(Path(sys.executable).parent / "grader"), "serve", "--port", str(port)],
                                        cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.append(line)
            if "First admin sign-in" in line:
                self.link_seen.set()
        self.link_seen.set()                      # exited: wake the waiter, which reports the output

    def admin_link(self, timeout: float = 300) -> str:
        self.link_seen.wait(timeout)
        for line in self.lines:
            match = re.search(r"First admin sign-in \(one-time link\): (\S+)", line)
            if match:
                return match.group(1)
        raise AssertionError("grader serve printed no admin link:\n" + "".join(self.lines[-60:]))

    def stop(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)        # Ctrl-C, as a user stops it
            try:
                self.process.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.reader.join(60)                      # it ends at the pipe's end of file
        self.process.stdout.close()


@pytest.fixture
def served(db, broker, tmp_path):
    assert Path(CHROMIUM).exists(), "Chromium is missing: apt-get install -y chromium (.ci/run does)"
    server = Served(tmp_path / "instance", free_port())
    yield server
    server.stop()


@pytest.fixture
def browser():
    from playwright.sync_api import sync_playwright
    SHOTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--disable-dev-shm-usage"])
        yield chromium
        chromium.close()


class Visitor:
    """One person's browser context; every page they see is screenshotted in order."""
    count = 0

    def __init__(self, browser, who: str):
        self.who = who
        self.context = browser.new_context(viewport={"width": 1280, "height": 800})    # a laptop
        self.context.set_default_timeout(PAGE_TIMEOUT_MS)
        self.page = self.context.new_page()

    def shot(self, name: str):
        Visitor.count += 1
        self.page.screenshot(path=str(SHOTS / f"{Visitor.count:02d}-{self.who}-{name}.png"), full_page=True)
        # every page fits a 1280 px laptop: wide tables scroll inside their own box, never the page
        overflow = self.page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"{name} ({self.page.url}) is {overflow} px wider than a 1280 px window"

    def go(self, url: str, name: str):
        self.page.goto(url)
        self.shot(name)

    def sign_in_with_link(self, link: str):
        self.go(link, "sign-in-link")
        self.page.click("input[type=submit][value='Sign in']")
        self.page.wait_for_url(re.compile(r"/account$|/$"))
        self.shot("signed-in")


def seed_tiny_assignment(db):
    """The small assignment the leaderboard story grades on (about a second per run)."""
    from store import specs
    from store.models import Course
    from sqlalchemy import select
    course = db.scalar(select(Course).where(Course.name == "CS149"))
    specs.new_assignment(db, str(TINY_SPEC), course=course, name="tiny", backend="sim", runs_per_hour=10,
                         deadline=dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=3))
    db.commit()


def drop_file(page, filename: str, data: bytes):
    """Drag-and-drop a file onto the upload zone, as a user dragging it from their desktop."""
    page.evaluate("""([name, text]) => {
        const transfer = new DataTransfer();
        transfer.items.add(new File([text], name, {type: "text/x-python"}));
        const zone = document.querySelector("[data-dropzone]");
        for (const type of ["dragenter", "dragover", "drop"]) {
            zone.dispatchEvent(new DragEvent(type, {dataTransfer: transfer, bubbles: true, cancelable: true}));
        }
    }""", [filename, data.decode()])


def upload_and_wait(visitor: Visitor, base: str, assignment: str, data: bytes, *, drag: bool = False) -> int:
    visitor.go(f"{base}/a/{assignment}", f"{assignment}-upload")
    if drag:
        drop_file(visitor.page, "conv2d.py", data)
        assert visitor.page.inner_text("[data-chosen]") == "conv2d.py"
    else:
        visitor.page.set_input_files("input[type=file]", files=[{"name": "conv2d.py", "mimeType": "text/x-python",
                                                                 "buffer": data}])
    visitor.page.click("input[type=submit][value='Upload and grade']")
    visitor.page.wait_for_url(re.compile(r"/runs/\d+$"))
    run_id = int(visitor.page.url.rsplit("/", 1)[1])
    visitor.shot(f"{assignment}-status-{visitor.page.inner_text('[data-field=status]')}")
    visitor.page.wait_for_selector("[data-field=status].done", timeout=GRADE_TIMEOUT_MS)
    visitor.page.wait_for_selector("[data-report-link]:visible")
    rows = visitor.page.locator("[data-tests] tbody tr").count()
    assert rows > 0 and visitor.page.is_hidden("[data-no-tests]")     # the tests filled in as they finished
    visitor.shot(f"{assignment}-status-done")
    return run_id


def test_the_whole_site_in_a_browser(served, browser, db):
    link = served.admin_link()
    base = link.split("/login/")[0]

    admin = Visitor(browser, "admin")
    admin.sign_in_with_link(link)
    admin.go(f"{base}/staff/", "console")
    admin.page.click("summary:has-text('Create a course')")            # a course is made on purpose, once
    admin.page.fill("#course_name", "CS149")
    admin.page.click("input[type=submit][value='Create course']")
    admin.page.wait_for_selector("text=Course CS149 created")
    admin.page.click("summary:has-text('Create an assignment')")
    admin.page.select_option("#course", "CS149")
    admin.page.fill("#name", "asst4")
    admin.page.select_option("select[name=spec]", "asst4-trainium2")
    admin.page.fill("#deadline", (dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=5)).strftime("%Y-%m-%d %H:%M"))
    admin.page.click("input[type=submit][value='Create assignment']")
    admin.page.wait_for_url(re.compile(r"/staff/assignments/asst4$"))
    admin.shot("assignment-created")
    seed_tiny_assignment(db)

    roster = "email,name,role\nada@example.edu,Ada L,student\ngrace@example.edu,Grace H,student\n" \
             "linus@example.edu,Linus T,student\ntim@example.edu,Tim TA,ta\n"
    admin.go(f"{base}/staff/roster", "roster")
    admin.page.select_option("#course", "CS149")
    admin.page.set_input_files("#csv_file", files=[{"name": "roster.csv", "mimeType": "text/csv",
                                                     "buffer": roster.encode()}])
    admin.page.click("input[type=submit][value='Import roster']")
    admin.page.wait_for_selector("[data-imported]")
    admin.shot("roster-imported")
    links = dict(zip(admin.page.locator("[data-imported] tbody td:first-child").all_inner_texts(),
                     admin.page.locator("[data-link]").all_inner_texts()))
    assert set(links) == {"ada@example.edu", "grace@example.edu", "linus@example.edu", "tim@example.edu"}

    # a student signs in, uploads the optimized reference, watches it graded, reads the report
    students = {}
    for email, nickname in (("ada@example.edu", "ada_l"), ("grace@example.edu", "grace_h"),
                            ("linus@example.edu", "linus_t")):
        who = Visitor(browser, nickname)
        who.sign_in_with_link(links[email])
        who.page.fill("#nickname", nickname)
        who.page.click("input[type=submit][value='Save nickname']")
        who.page.wait_for_selector("text=Nickname saved")
        students[nickname] = who
    ada = students["ada_l"]
    run_id = upload_and_wait(ada, base, "asst4", OPTIMIZED, drag=True)
    ada.go(f"{base}/runs/{run_id}/report", "asst4-report")
    conv_rows = ada.page.locator("[data-tests] tbody tr", has_text="conv2d.py")
    verdicts = dict(zip(conv_rows.locator("td:first-child").all_inner_texts(),
                        conv_rows.locator("td:nth-child(7)").all_inner_texts()))
    failed = {test: message for test, message in verdicts.items() if "match the reference" not in message
              and "within the optimized threshold" not in message}
    assert not failed, f"the optimized reference did not pass every conv2d test (on an overloaded machine a " \
                       f"configuration can run past the grader's time limit): {failed}"
    assert ada.page.locator("[data-chart=p99] svg line.optimized").count() >= 4
    timeline = ada.page.locator("img[data-timeline]").first
    timeline.scroll_into_view_if_needed()
    assert ada.page.evaluate("img => img.complete && img.naturalWidth > 0", timeline.element_handle())
    assert ada.page.locator("[data-mfu]").first.inner_text().endswith("%")
    assert ada.page.locator("[data-hotspots] tbody tr").count() > 0
    ada.shot("asst4-report-timeline")

    # three students on the small assignment: optimized, relaxed, and the unfinished template
    kernels = {"ada_l": OPTIMIZED, "grace_h": RELAXED, "linus_t": TEMPLATE}
    reports = {}
    for nickname, data in kernels.items():
        who = students[nickname]
        tiny_run = upload_and_wait(who, base, "tiny", data)
        reports[nickname] = json.loads(who.context.request.get(f"{base}/runs/{tiny_run}/status").text())
    assert reports["linus_t"]["score"] == 0 < reports["grace_h"]["score"] <= reports["ada_l"]["score"]
    board = students["grace_h"]
    board.go(f"{base}/leaderboard/tiny", "leaderboard")
    ranked = [n.replace("(you)", "").strip() for n in board.page.locator("[data-nickname]").all_inner_texts()]
    assert ranked == ["ada_l", "grace_h", "linus_t"]
    assert "simulated" in board.page.inner_text("[data-backend]")

    # a TA adopts a new thresholds version and rescores every graded run
    tim = Visitor(browser, "ta")
    tim.sign_in_with_link(links["tim@example.edu"])
    tim.go(f"{base}/staff/assignments/tiny", "staff-assignment")
    tim.page.fill("#version", "t2-strict")
    # stricter: the relaxed kernel (25.7 us here) drops to the 95% tier, the optimized one (18.9 us) stays,
    # each with a margin a small cost-model change will not cross
    tim.page.fill("#thresholds", json.dumps({"perf_tiny": {"optimized": 22, "relaxed": 50}}))
    tim.page.click("input[type=submit][value='Adopt thresholds']")
    # tightening by more than 10%: what it does is shown, and it waits for a second yes
    tim.page.wait_for_selector("[data-confirm-thresholds]")
    tim.shot("thresholds-confirm")
    assert "-45.0%" in tim.page.inner_text("[data-changes]")
    tim.page.click("button:has-text('Adopt t2-strict anyway')")
    # the rescore is a staff task: its page follows the staff worker until it is done
    tim.page.wait_for_url(re.compile(r"/staff/tasks/\d+$"))
    assert "Thresholds version t2-strict is in force" in tim.page.inner_text(".flash.success")
    tim.page.wait_for_selector("[data-field=status]:has-text('done')", timeout=PAGE_TIMEOUT_MS)
    tim.shot("thresholds-adopted")
    assert re.search(r"Rescored [1-9]\d* graded runs", tim.page.inner_text("[data-field=summary]"))
    tim.go(f"{base}/staff/assignments/tiny", "staff-assignment-rescored")
    assert tim.page.inner_text("[data-thresholds-version]") == "t2-strict"
    tim.go(f"{base}/staff/submissions?assignment=tiny", "staff-submissions")
    tim.page.click("[data-submissions] tbody tr:first-child a")
    tim.page.wait_for_selector("[data-seed]")
    tim.shot("staff-run")
    rescored = {n: json.loads(students[n].context.request.get(f"{base}/runs/{r['run_id']}/status").text())["score"]
                for n, r in reports.items()}
    assert rescored["ada_l"] == reports["ada_l"]["score"] and rescored["grace_h"] < reports["grace_h"]["score"]
    ada.go(f"{base}/a/tiny", "tiny-history")
    ada.page.click("[data-history] a:has-text('report')")
    assert "thresholds_version t2-strict" in ada.page.inner_text("main")
    ada.shot("tiny-report-rescored")

    # an upload over the limit, sent to the real server, gets the 413 page, not a reset connection
    import requests
    big = requests.post(f"{base}/a/tiny/submit", files={"file": ("conv2d.py", b"x" * (20 * 1024 * 1024))},
                        cookies={c["name"]: c["value"] for c in ada.context.cookies()}, timeout=120)
    assert big.status_code == 413 and "larger than the 16 MiB" in big.text
