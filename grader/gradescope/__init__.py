"""Gradescope: a course keeps collecting submissions on Gradescope and gets our grades.

`grader gradescope build` makes the autograder zip Gradescope runs per submission (setup.sh,
run_autograder, the spec, a config). run_autograder calls `python -m grader.gradescope.run`,
which grades in one of two modes chosen at build time:

- local: on the simulator inside Gradescope's container, the student's code confined as well
  as the container allows (isolation.py), the result written as results.json (results.py);
- service: the submission is forwarded to our service with a course token (service.py), so
  the run lands in our store, the TA console and our leaderboard, and its report comes back.

Nothing here is imported by the sandboxed child except probe.py and syscall_filter.py, so
this file imports nothing."""
