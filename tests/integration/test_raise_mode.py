"""on_timeout="raise" (issue 41), with real gloo ranks and real watchdogs: at the hard verdict each rank with
a call past the deadline gets c10d_observer.CollectiveHang, carrying the verdict, in its main thread; the
culprit never does.  gloo offers nothing that ends a waiting call, so the exception comes once the call
returns: the test releases the culprit after the watchdogs asked and the ranks said how it will come, and
the ranks' ``except`` records what it carried; the job's own SIGUSR1 handler runs before it.  The NCCL half
(its group aborted, so the wait ends) cannot run here: tests/unit/test_raising.py stands an object in for the
NCCL group, tests/gpu/ checks it on a GPU."""
import re

from harness import wait_until


def test_under_raise_each_waiting_rank_gets_the_verdict_as_an_exception_never_the_culprit(job_factory):
    job = job_factory("raise_mode", 3, culprit=2, timeout=4.0)  # the released culprit's last calls stay far inside 4 s
    for r in (0, 1):
        job.wait_report(r)
    # both waiting ranks asked by their watchdogs with the job's signal, so the observer's handler raises it
    # after the job's own (gloo: "once the call returns")
    wait_until(lambda: len(re.findall(r"on_timeout=raise: CollectiveHang (is )?raised by the observer's SIGUSR1 "
                                      r"handler in the main thread, after the job's own handler",
                                      job.log_text())) >= 2,
               60, lambda: "both waiting ranks to say it\n" + job.log_text())
    log = job.log_text()
    for r in (0, 1):
        assert "rank %d: on_timeout=raise: asked rank pid" % r in log, log
    assert "rank 2: on_timeout=raise" not in log, log  # the culprit is never asked
    assert "torch cannot end a waiting gloo call from outside it" in log, log
    assert "once the call returns or raises" in log, log
    job.release()
    assert job.finish() == [0, 0, 0], job.log_text()
    for r in (0, 1):
        f = job.facts(r)
        assert f["raised"] and f["is_runtime_error"], (r, f, job.log_text())
        assert f["culprit_ranks"] == [2], f
        assert "culprit ranks: 2" in f["raised"] and "on_timeout=raise" in f["raised"], f["raised"]
        assert [c.split(" ")[0] for c in f["calls"]] == ["all_reduce"], f["calls"]
        assert f["groups"] and f["ended"] == [], f  # gloo: nothing was ended
        assert f["job_handler_ran"] == 1, f  # the job's own SIGUSR1 handler ran, once, before the exception
    assert job.facts(2)["raised"] is None and job.facts(2)["job_handler_ran"] == 0, job.facts(2)
