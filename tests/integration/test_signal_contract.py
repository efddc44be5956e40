"""The signal contract (docs/contracts.md, "The signal"), with real gloo ranks and real watchdogs: the configured signal
goes to each rank with an overdue call, once per hang, and runs the handler the job had before enable();
the culprit (nothing overdue) is never signalled; signal=None sends none; a handler installed after
enable() is never triggered (test_lifecycle.py::test_a_signal_handler_installed_after_enable_is_never_triggered).
Python runs a handler once the main thread is back in Python: a rank blocked in the collective runs it when
the collective returns, which is when these tests look."""
import time

import pytest

from harness import TEST_TIMING, reported


@pytest.mark.parametrize("culprit,timing", [(1, TEST_TIMING), (2, TEST_TIMING),
                                            pytest.param(1, None, id="1-user_times", marks=pytest.mark.full)],
                         ids=["1", "2", "1-user_times"])
def test_the_handler_the_job_had_runs_once_on_each_rank_that_waited_never_on_the_culprit(job_factory, culprit, timing):
    job = job_factory("user_handler", 3, culprit=culprit, step=1, timeout=1.0, timing=timing)
    hang = None
    for r in range(3):
        if r != culprit:
            hang = job.wait_report(r)["overdue"][0]
            job.wait_stacks(r, "in all_reduce")  # the stacks came from the helper, not from the signal
            job.wait_signalled(r)  # at the hard verdict
    released = time.time()
    job.release()
    assert job.finish() == [0, 0, 0], job.log_text()  # signalled ranks were not killed
    for r in range(3):
        f = job.facts(r)
        # once per hang on each rank that waited; never on the culprit for the hang.  (Once released, a rank's
        # call may take past 1 s on a loaded machine: an overdue call of its own, signalled where it is still
        # in flight at its verdict, not where it completed first)
        late = [e for e in reported(job, r) if e["level"] == "hard" and e["detected_at"] >= released]
        base = 0 if r == culprit else 1
        assert base <= f["handler_calls"] <= base + len(late), (r, f, late, job.log_text())
        assert f["handler_calls_by_others"] == 1  # and a SIGUSR1 from elsewhere still runs it
    assert not reported(job, culprit, hang, before=released)  # the culprit never waited in the call


def test_with_signal_none_no_handler_runs_and_the_hang_is_still_reported(job_factory):
    job = job_factory("user_handler", 2, culprit=1, step=1, timeout=1.0, no_signal=True)
    rep = job.wait_report(0)
    job.wait_stacks(0, "in all_reduce")
    job.release()
    assert job.finish() == [0, 0], job.log_text()
    assert rep["signal"] == "none" and rep["overdue"][0]["op"] == "all_reduce"
    for r in (0, 1):
        assert job.facts(r)["handler_calls"] == 0 and job.facts(r)["handler_calls_by_others"] == 1


def test_a_signal_the_watchdog_did_not_send_is_named_once_where_the_job_had_no_handler(job_factory):
    """Slurm's --signal=USR1 (PyTorch Lightning's auto-requeue finds the observer's handler and installs
    none): where the job had no handler of its own, the rank says in one line that the signal met nothing
    and how to keep both; the observer's own signal to the rank that waited is not taken for a foreign one."""
    import os
    import signal
    from harness import wait_until
    job = job_factory("skip", 2, culprit=1, step=1, timeout=1.0)
    job.wait_report(0)  # rank 0's watchdog sent it SIGUSR1 (it runs once all_reduce returns)
    wait_until(lambda: (job.facts(1) or {}).get("stalled_at") == 1, 30, "rank 1 to stall\n" + job.log_text())
    os.kill(job.procs[1].pid, signal.SIGUSR1)  # the scheduler's, to the rank stalled in Python
    os.kill(job.procs[1].pid, signal.SIGUSR1)
    line = "rank 1 received SIGUSR1, which the observer's watchdog did not send"
    wait_until(lambda: line in job.log_text(), 30, "the line\n" + job.log_text())
    job.release()
    assert job.finish() == [0, 0], job.log_text()  # nothing ended the rank: the default action did not run
    logs = job.log_text().split("--- rank 1 log ---")
    assert "did not send" not in logs[0], logs[0]  # rank 0's signal was the watchdog's
    assert logs[1].count("which the observer's watchdog did not send") == 1, logs[1]  # said once
