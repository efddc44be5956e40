"""torch's functional collectives: their native ops (2.3+), probed, never by version, and how the public API
runs them.  Part of ``compat``: callers read these names through ``c10d_observer.compat``."""
import importlib
import sys


# The functional collectives' ops (torch 2.3+ runs them in C++): op name -> (the op as the channel names
# it, the index of the tensor whose dtype and size must agree across ranks, or None)
FUNCOL_OPS = (
    ("_c10d_functional", "all_reduce", "all_reduce", 0),
    ("_c10d_functional", "all_reduce_", "all_reduce", 0),
    ("_c10d_functional", "all_reduce_coalesced", "all_reduce_coalesced", None),
    ("_c10d_functional", "all_reduce_coalesced_", "all_reduce_coalesced", None),
    ("_c10d_functional", "all_gather_into_tensor", "all_gather_into_tensor", 0),
    ("_c10d_functional", "all_gather_into_tensor_out", "all_gather_into_tensor", 0),
    ("_c10d_functional", "all_gather_into_tensor_coalesced", "all_gather_into_tensor_coalesced", None),
    ("_c10d_functional", "reduce_scatter_tensor", "reduce_scatter_tensor", None),
    ("_c10d_functional", "reduce_scatter_tensor_coalesced", "reduce_scatter_tensor_coalesced", None),
    ("_c10d_functional", "all_to_all_single", "all_to_all_single", None),
    ("_c10d_functional", "broadcast", "broadcast", 0),
    ("_c10d_functional", "broadcast_", "broadcast", 0),
    ("_c10d_functional_autograd", "all_gather_into_tensor", "all_gather_into_tensor", 0),
    ("_c10d_functional_autograd", "reduce_scatter_tensor", "reduce_scatter_tensor", None),
    ("_c10d_functional_autograd", "all_to_all_single", "all_to_all_single", None),
)


def _op_packet(ns_name, name):
    """(the op's OpOverloadPacket, its argument names), or None.  A packet's ``__call__`` calls its
    ``_op`` attribute (torch/_ops.py, 2.3 to 2.15), which is what the observer wraps: the packet itself,
    which compiled graphs and torch's own code refer to, stays as it is."""
    import torch
    try:
        packet = getattr(getattr(torch.ops, ns_name), name)
        args = [a.name for a in packet.default._schema.arguments]
        if not callable(vars(packet).get("_op")):
            return None
    except Exception:  # the op or its namespace does not exist in this release
        return None
    return packet, args


def funcol_ops():
    """The native functional collectives of this torch, probed (never by version): ``(wait_tensor's
    packet, [(packet, op, channel op, group_name index, size index)], is_compiling)``, or None where there
    are none (before 2.3, or where ``wait_tensor`` is missing)."""
    wait = _op_packet("_c10d_functional", "wait_tensor")
    if wait is None:
        return None
    ops = []
    for ns_name, name, op_name, size_index in FUNCOL_OPS:
        found = _op_packet(ns_name, name)
        if found is None or "group_name" not in found[1]:
            continue
        ops.append((found[0], "%s.%s" % (ns_name, name), op_name, found[1].index("group_name"), size_index))
    return (wait[0], ops, _is_compiling()) if ops else None


def funcol_kind():
    """How this torch runs the functional collectives: "native" (the public API calls the C++ ops of
    ``torch.ops._c10d_functional``, 2.3+), "python" (through torch.distributed: 2.1, and 2.2, whose C++ ops
    exist but which the public API does not call), or None (none)."""
    try:
        fc = importlib.import_module("torch.distributed._functional_collectives")
    except Exception:
        return None
    return "native" if funcol_ops() is not None and _funcol_api_native(fc) else "python"


def _funcol_api_native(fc):
    """Whether ``funcol.all_reduce`` calls the native ops: its code names ``_c10d_functional`` (2.3+; 2.2
    names only the Python-implemented ``c10d_functional``), and torch's own switch, where it has one
    (``native_funcol_enabled``, off with TORCH_DISABLE_NATIVE_FUNCOL=1 on some releases), is on."""
    code = getattr(getattr(fc, "all_reduce", None), "__code__", None)
    if code is None or "_c10d_functional" not in code.co_names:
        return False
    for owner in (fc, sys.modules.get("torch.distributed._functional_collectives_impl")):
        switch = getattr(owner, "native_funcol_enabled", None)
        if callable(switch):
            try:
                return bool(switch())
            except Exception:
                return True
    return True


def _is_compiling():
    """torch.compiler.is_compiling (2.3+), else the older private names; a function returning False where
    none exists."""
    import torch
    for owner, name in (("compiler", "is_compiling"), ("_dynamo", "is_compiling"), ("_utils", "is_compiling")):
        try:
            fn = getattr(getattr(torch, owner), name)
        except Exception:
            continue
        if callable(fn):
            return fn
    return lambda: False
