"""The .pth line and the settings run hands to the processes it starts (no process group needed)."""
import os
import signal
import subprocess
import sys

from c10d_observer import _autostart, config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_exported_settings_resolve_to_the_same_config(tmp_path):
    cfg = config.resolve(timeout=42.5, poll_interval=0.7, dump_dir=str(tmp_path), signal=signal.SIGUSR2,
                         source="patch", on_timeout="abort", env={}, check_source=lambda *a: None)
    env = {}
    _autostart.export(cfg, env)
    assert env[_autostart.ENV] == "1" and _autostart.wanted(env)
    assert config.resolve(env=env, check_source=lambda *a: None) == cfg


def test_the_pth_line_does_nothing_unless_asked(tmp_path):
    code = ("import sys\nline = open(sys.argv[1]).read()\nexec(line)\n"
            "print(sorted(m for m in sys.modules if m.startswith('c10d_observer')),"
            " [type(f).__name__ for f in sys.meta_path if type(f).__module__.startswith('c10d_observer')])")
    path = str(tmp_path / "c10d_observer.pth")
    with open(path, "w") as f:
        f.write(_autostart.PTH_LINE)
    for value, want in (("", "[] []"), ("off", "[] []"),
                        ("1", "['c10d_observer', 'c10d_observer._autostart', 'c10d_observer._unset', "
                              "'c10d_observer._version', 'c10d_observer.console'] ['_Finder']")):
        env = {k: v for k, v in os.environ.items() if not k.startswith("C10D_OBSERVER")}
        env.update(C10D_OBSERVER=value, PYTHONPATH=ROOT)
        out = subprocess.run([sys.executable, "-S", "-c", code, path], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, universal_newlines=True, timeout=60)
        assert out.returncode == 0 and out.stdout.strip() == want, (value, out.stdout)


def test_the_recorder_is_turned_on_before_the_first_group_only_where_torch_leaves_it_off(monkeypatch):
    """Issue 31: on torch 2.5-2.10 the flight recorder records only where a buffer size is set before the first
    process group (measured on 2.8, 2.9, 2.10: set after `import torch` and before init_process_group it
    counts); C10D_OBSERVER=1 and run set it there, unless the user set either variable."""
    from c10d_observer import compat
    from torch._C import _distributed_c10d as C
    has = hasattr(C, "_dump_fr_trace_json") or hasattr(C, "_dump_nccl_trace_json")  # this build has a recorder
    for name in compat.FR_ENV:
        monkeypatch.delenv(name, raising=False)
    for version, off in (("2.4.1", False), ("2.5.1", True), ("2.8.0+cu128", True), ("2.10.0", True),
                         ("2.11.0", False), ("2.15.0", False), ("1.8.1", False)):
        monkeypatch.delenv(compat.NCCL_TRACE_ENV, raising=False)
        expect = compat.NCCL_TRACE_ENV if off and has else None
        assert compat.recorder_on_before_init(version) == expect, version
        assert (os.environ.get(compat.NCCL_TRACE_ENV) == "2000") == (expect is not None), version
    monkeypatch.setenv("TORCH_FR_BUFFER_SIZE", "0")  # the user's choice stands
    monkeypatch.delenv(compat.NCCL_TRACE_ENV, raising=False)
    assert compat.recorder_on_before_init("2.9.1") is None and compat.NCCL_TRACE_ENV not in os.environ
