"""What enable()/disable() leave behind, and what happens when a rank or a watchdog dies."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

import c10d_observer
from harness import ROOT, pid_alive, reported, timings, wait_until


def test_rank_killed_with_sigkill_takes_its_watchdog_along(job_factory):
    job = job_factory("block", 2, timeout=30.0)
    facts = [job.wait_facts(r, "ready") and job.facts(r) for r in (0, 1)]
    wd = facts[0]["watchdog_pid"]
    assert pid_alive(wd)
    killed_at = time.monotonic()
    job.procs[0].send_signal(signal.SIGKILL)
    job.procs[0].wait()
    wait_until(lambda: not pid_alive(wd), 5.0, "the watchdog of the SIGKILLed rank to exit")
    assert time.monotonic() - killed_at < 5.0
    assert pid_alive(facts[1]["watchdog_pid"])  # the other rank's watchdog is untouched


def test_twenty_enable_disable_cycles_leave_nothing_behind(job_factory):
    job = job_factory("cycles", 2, n=20)
    assert job.finish() == [0, 0], job.log_text()
    for r in (0, 1):
        f = job.facts(r)
        assert len(f["watchdog_pids"]) == 20 and len(set(f["watchdog_pids"])) == 20
        assert not any(pid_alive(p) for p in f["watchdog_pids"])
        assert f["children"] == []
        assert f["handler_restored"] and f["user_handler_calls"] == 1
        assert f["pg_restored"] and f["wait_restored"] and f["functions_restored"]
        assert f["shm_left"] == []


@pytest.mark.parametrize("timing", timings())
def test_a_killed_watchdog_is_started_again_said_once_and_a_later_hang_is_reported(job_factory, timing):
    """Issue 25: the watchdog killed mid-job (the OOM killer, kill -9): one line, a new watchdog within a
    few polls, and a hang after it is reported (it was never reported before)."""
    job = job_factory("watchdog_dies", 2, timeout=1.0, timing=timing)
    rep = job.wait_report(0)
    job.wait_facts(0, "second_watchdog")
    f0 = job.facts(0)
    job.release()
    assert job.finish() == [0, 0], job.log_text()
    assert f0["second_watchdog"] != f0["first_watchdog"]
    assert rep["watchdog_pid"] == f0["second_watchdog"] and rep["watchdog_restarts"] == 1
    assert rep["overdue"][0]["seq"] == 6  # the all_reduce rank 1 skipped, after the restart
    log = job.log_text()
    for r in (0, 1):
        assert log.count("c10d_observer: the watchdog (pid %d) exited with code -9; started again"
                         % job.facts(r)["first_watchdog"]) == 1, log
        assert job.facts(r)["result"] == 2 ** 6


def test_a_stopped_watchdog_reports_nothing_false_and_then_the_real_hang(job_factory):
    """Issue 25: the watchdog stopped (SIGSTOP) 3 timeouts long while the job runs healthy calls, then
    resumed: no false report; the later hang is named."""
    job = job_factory("watchdog_stopped", 2, timeout=1.0, stopped_s=3.0)
    rep = job.wait_report(0)
    released = time.time()
    job.release()
    assert job.finish() == [0, 0], job.log_text()
    assert job.facts(0)["healthy_calls"] > 10
    [e] = rep["overdue"]  # the skipped all_reduce only: nothing from the time it was stopped
    stream = [g for g in rep["groups"] if g["stream"] == e["stream"]][0]
    assert e["seq"] == stream["last_started"] and not reported(job, 1, before=released)


def test_on_timeout_abort_ends_the_waiting_rank_after_the_dump_and_the_verdict(job_factory):
    job = job_factory("skip", 2, culprit=1, step=1, timeout=1.0, on_timeout="abort")
    rep = job.wait_report(0)
    wait_until(lambda: job.procs[0].poll() is not None, 60, "rank 0 to be ended\n" + job.log_text())
    # the exit-code contract: "a collective hang was found; the verdict is in dump_dir", not a crash's code
    assert job.procs[0].returncode == c10d_observer.HANG_EXIT_CODE == 93, job.log_text()
    assert "ending this rank with exit code 93" in job.log_text() and "sending SIGTERM" not in job.log_text()
    assert "in all_reduce" in job.stacks(0)  # the dump came first
    assert rep["on_timeout"] == "abort"
    # the verdict was merged and written before the rank was ended (issue 13, case 3)
    path = os.path.join(job.dump_dir, "verdict.json")
    assert os.path.exists(path), job.log_text()
    with open(path) as f:
        v = json.load(f)
    assert v["culprit_ranks"] == [1] and v["hangs"][0]["missing_ranks"] == [1], v
    # and report DIR afterwards says what the console said: the record, and that the rank was ended
    wait_until(lambda: any(json.load(open(os.path.join(job.dump_dir, n))).get("alive") is False
                           for n in os.listdir(job.dump_dir) if n.startswith("end-rank0-")),
               30, "rank 0's end\n" + job.log_text())
    out = subprocess.run([sys.executable, "-m", "c10d_observer", "report", "--json", job.dump_dir],
                         stdout=subprocess.PIPE, universal_newlines=True, env=dict(os.environ, PYTHONPATH=ROOT))
    job.release()
    assert out.returncode == 1, out.stdout
    again = json.loads(out.stdout)
    h = again["hangs"][0]
    assert (h["op"], h["seq"], h["waiting_ranks"], h["missing_ranks"]) == ("all_reduce", 2, [0], [1]), again
    assert again["culprit_ranks"] == [1] and again["summary"] == v["summary"]
    assert h["outcome"]["state"] == "ended" and 0 in h["outcome"]["aborted_ranks"], h["outcome"]


def test_enable_before_init_process_group_covers_groups_created_later(job_factory):
    job = job_factory("before_init", 2, timeout=1.0)
    rep = job.wait_report(0)
    job.wait_stacks(0, "in all_reduce")
    job.release()
    assert job.finish() == [0, 0], job.log_text()
    e = rep["overdue"][0]
    assert len(rep["overdue"]) == 1 and e["op"] == "all_reduce" and e["seq"] == 2
    assert e["group_ranks"] == [0, 1] and rep["rank"] == 0 and rep["world_size"] == 2
    assert e["group"] != [g for g in rep["groups"] if g["in_flight_seq"] is None][0]["group"]


def test_second_enable_same_settings_returns_the_observer_other_settings_raise(job_factory):
    job = job_factory("reenable", 1)
    assert job.finish() == [0], job.log_text()
    f = job.facts(0)
    assert f["same_object"] is True and f["still_watching"] is True
    assert "already enabled" in f["error"] and "timeout=6.0" in f["error"]


def test_watchdog_exits_at_normal_interpreter_exit(job_factory):
    job = job_factory("exit_without_disable", 2, timeout=30.0, normal_exit=True)
    assert job.finish() == [0, 0], job.log_text()
    for r in (0, 1):
        wd = job.facts(r)["watchdog_pid"]
        wait_until(lambda: not pid_alive(wd), 5.0, "the watchdog of rank %d to exit with it" % r)


def test_disable_is_prompt_while_a_forked_child_holds_the_lifeline(job_factory):
    job = job_factory("forked_child", 1)
    assert job.finish() == [0], job.log_text()
    f = job.facts(0)
    assert not pid_alive(f["watchdog_pid"])
    assert f["watchdog_exit"] == 0  # it left on "stop", not killed after disable()'s 5 s wait (-9)


def test_enable_warns_of_groups_whose_torch_timeout_comes_first(job_factory):
    import torch
    from torch._C import _distributed_c10d as C
    job = job_factory("torch_timeouts", 2, timeout=5.0, torch_timeout=4, short_s=3)
    assert job.finish() == [0, 0], job.log_text()
    f = job.facts(0)

    def warned(group):
        return [w for w in f["warnings"] if "timeout of group %s " % group in w]

    if not hasattr(C.ProcessGroup, "_get_backend"):  # torch 1.x keeps a group's timeout in C++ only
        assert f["warnings"] == [], (torch.__version__, f["warnings"])
        return
    assert len(warned(f["world"])) == 1 and warned(f["world"])[0] in f["at_enable"]  # world: 4 s <= 5 s
    assert "(4 s)" in warned(f["world"])[0]
    assert len(warned(f["short_sub"])) == 1 and "(3 s)" in warned(f["short_sub"])[0]
    assert warned(f["default_sub"]) == []  # torch's default 30 min: the observer reports first


def test_a_signal_handler_installed_after_enable_is_never_triggered(job_factory):
    """Issue 13, case 2: the job replaces the observer's SIGUSR1 handler after enable(); at the hang the
    observer sends SIGUSR1 to no rank (neither the waiting one nor, at the gather, the culprit), says which
    handler replaced it and how to choose another signal, and takes stacks from py-spy where installed."""
    job = job_factory("foreign_handler", 2, timeout=1.0)
    rep = job.wait_report(0)
    v_path = os.path.join(job.dump_dir, "verdict.json")
    wait_until(lambda: os.path.exists(v_path), 60, "the verdict\n" + job.log_text())
    log = job.log_text()
    job.release()
    assert job.finish() == [0, 0], job.log_text()
    for r in (0, 1):
        assert not os.path.exists(os.path.join(job.work_dir, "foreign-rank%d" % r)), "their handler ran on rank %d" % r
    h = rep["signal_handler"]
    assert h["ours"] is False and "_requeue_handler" in h["replaced_by"], h
    assert "no SIGUSR1 sent: its handler was replaced after enable() by" in log, log
    assert "C10D_OBSERVER_SIGNAL=SIGUSR2" in log and "run --signal SIGUSR2" in log
    with open(v_path) as f:
        assert json.load(f)["culprit_ranks"] == [1]  # the verdict needs no signal
    if rep.get("py_spy_dump"):  # py-spy installed (the tox envs): stacks from outside instead
        assert os.path.exists(rep["py_spy_dump"])
