"""``c10d-observer watch DIR`` in a real terminal (tmux: a detached session, keys sent, the pane captured)
while real gloo ranks hang: the ranks x groups positions, the overdue call and the verdict on screen, and a
clean exit on Ctrl-C.  Skips where tmux is missing (.ci/run installs Debian's)."""
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from harness import ROOT, wait_until

TMUX = shutil.which("tmux")


@pytest.mark.skipif(TMUX is None, reason="no tmux on this machine (.ci/run installs Debian's)")
def test_watch_shows_the_hang_live_and_ends_cleanly_on_ctrl_c(job_factory, tmp_path):
    job = job_factory("skip", 3, culprit=2, step=1, timeout=1.0)
    job.wait_report(0)
    tm = [TMUX, "-L", "c10d-observer-test-%d" % os.getpid(), "-f", os.devnull]
    status = tmp_path / "watch-exit"
    cmd = "env PYTHONPATH=%s %s -m c10d_observer watch %s; echo $? > %s; exec sleep 300" % (
        shlex.quote(ROOT), shlex.quote(sys.executable), shlex.quote(job.dump_dir), shlex.quote(str(status)))
    subprocess.run(tm + ["new-session", "-d", "-s", "w", "-x", "120", "-y", "30", cmd], check=True)

    def screen():
        return subprocess.run(tm + ["capture-pane", "-p", "-t", "w"], stdout=subprocess.PIPE,
                              universal_newlines=True).stdout

    def rows(text):
        return {line.split()[0]: line for line in text.splitlines() if re.match(r"\d+ \(", line)}

    try:
        # every rank live, the two that wait in all_reduce #2 past the timeout (!), the culprit done with #1
        last = [""]

        def hang_shown():
            last[0] = s = screen()
            return s if "verdict (" in s and "ranks 0-2 live" in s and "!" in rows(s).get("0", "") else None
        try:
            shot = wait_until(hang_shown, 60, "the hang on the screen")
        except AssertionError:
            raise AssertionError("the hang never showed; the last screen:\n%s\n%s" % (last[0], job.log_text()))
        r = rows(shot)
        assert "#2 all_reduce" in r["0"] and "#2 all_reduce" in r["1"] and "!" in r["1"], shot
        assert "done #1" in r["2"] and "all_reduce" not in r["2"], shot
        assert "ranks 0-2 live" in shot and "OVERDUE (hard): all_reduce #2 on group 0 (ranks 0-2)" in shot, shot
        assert "rank 2 (" in shot.split("verdict (", 1)[1] and "never arrived" in shot, shot
        assert os.path.exists(os.path.join(job.dump_dir, "watch-request.json"))
        subprocess.run(tm + ["send-keys", "-t", "w", "C-c"], check=True)
        wait_until(lambda: status.exists() and status.read_text().strip(), 30, "watch to exit\n" + screen())
        assert status.read_text().strip() == "0", screen()
        assert "Traceback" not in screen() and "KeyboardInterrupt" not in screen(), screen()
        assert not os.path.exists(os.path.join(job.dump_dir, "watch-request.json"))  # nobody asks any more
    finally:
        subprocess.run(tm + ["kill-server"], stderr=subprocess.DEVNULL)
        job.release()
        job.finish()
