"""The observer leaves torch's own tools as it found them (issue 41): a user's flight-recorder dump of an
observed job holds no entry of the observer's, and torch's analyser (torchfrtrace, ``python -m
torch.distributed.flight_recorder.fr_trace``) reads it as it reads the same job's dump unobserved.

The observer's probe of whether the recorder records gloo (compat.fr_recording) ran a call on a private
one-rank gloo group in the rank itself: it sat in the user's dump under a group no pg_config names, and the
analyser stopped on it (KeyError: ('', 0)).  It now runs in a child process, and not at all where a buffer
size variable says."""
import os
import pickle
import subprocess
import sys

import pytest

from harness import ROOT

torch = pytest.importorskip("torch")
HERE = os.path.dirname(os.path.abspath(__file__))


def _has_recorder():
    from torch._C import _distributed_c10d as C
    try:
        import torch.distributed.flight_recorder.fr_trace  # noqa: F401
    except ImportError:
        return False
    return hasattr(C, "_dump_fr_trace")


pytestmark = pytest.mark.skipif(not _has_recorder(), reason="this torch has no gloo flight recorder dump and "
                                                           "analyser (torch 2.8+)")


def _run_both(tmp_path, buffer_size):
    """The plain job and the observed one, side by side (two processes at once, then torch's analyser on each
    dump at once): {mode: (the dumps' pg_config and entries, the analyser's exit and last line, the job's
    output)}."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("C10D_OBSERVER", "TORCH_FR_", "TORCH_NCCL_TRACE"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH")) if p)
    if buffer_size is not None:
        env["TORCH_FR_BUFFER_SIZE"] = str(buffer_size)
    outs, jobs = {}, {}
    for mode in ("plain", "observed"):
        outs[mode] = tmp_path / mode
        outs[mode].mkdir()
        jobs[mode] = subprocess.Popen([sys.executable, os.path.join(HERE, "fr_dump_job.py"), str(outs[mode]), mode],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      universal_newlines=True)
    logs = {mode: job.communicate(timeout=300)[0] for mode, job in jobs.items()}
    for mode, job in jobs.items():
        assert job.returncode == 0, logs[mode]
    analysers = {mode: subprocess.Popen([sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace",
                                         str(outs[mode] / "dumps")], env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, universal_newlines=True) for mode in outs}
    got = {}
    for mode, analysed in analysers.items():
        text = analysed.communicate(timeout=300)[0]
        lines = [x for x in text.splitlines() if x.strip()]
        dumps = [pickle.load(open(str(outs[mode] / "dumps" / ("rank_%d" % r)), "rb")) for r in (0, 1)]
        seen = [(d["pg_config"], [(tuple(e["process_group"]), e["profiling_name"]) for e in d["entries"]])
                for d in dumps]
        got[mode] = (seen, (analysed.returncode, lines[-1] if lines else ""), logs[mode])
    return got


@pytest.mark.parametrize("buffer_size", [2000, None], ids=["TORCH_FR_BUFFER_SIZE=2000", "torch's-default"])
def test_an_observed_jobs_flight_recorder_dump_is_the_unobserved_ones(tmp_path, buffer_size):
    got = _run_both(tmp_path, buffer_size)
    (plain, plain_read, _), (observed, observed_read, log) = got["plain"], got["observed"]
    assert "c10d_observer: watching collectives" in log, log  # it was observed
    assert observed == plain, (observed, plain)  # the same entries, the same pg_config: nothing of the observer's
    assert not any(pg == ("", "") for _, entries in observed for pg, _ in entries)
    # torch's analyser says of it what it says of the unobserved job's (on 2.13 both stop at gloo's unnamed
    # pg_config: KeyError ('0', 0), torch's, not ours)
    assert observed_read == plain_read, (observed_read, plain_read)
