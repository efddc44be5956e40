"""What one bundle costs the merging node's relay to read (issue 44): the store's reads, one ``add`` and one ``get``
a node (the code before 2026-12-04) or a batch of FETCH_BATCH nodes' counters and bundles with one
``multi_get`` each (relay.StoreRelay._counters, _reads), and the write of the node's file, on a real
``TCPStore`` server in a process of its own (as torchrun's agent holds it), on loopback.

    python benchmarks/fetch_reads.py [--nodes 2047] [--bytes 2560] [--repeat 5]

Prints milliseconds a bundle (the median of the repeats) and writes ``results/fetch_reads_<torch>_<date>.json``.
``c_b`` of docs/scale.md's model is a bundle's read plus its write, as the 16,384-rank harness measured it
(0.55 ms, 2026-12-02): this splits it, on an idle machine.
"""
import argparse
import base64
import datetime
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _harness import RESULTS, median, today, write_json  # noqa: E402
from scale import start_server  # noqa: E402
from c10d_observer import documents as _documents  # noqa: E402
from c10d_observer import dumpdir as _dumpdir  # noqa: E402
from c10d_observer import relay as _relay  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=2047, help="bundles read a pass (2,047: 16,384 ranks' other nodes)")
    ap.add_argument("--bytes", type=int, default=2560, help="a bundle's size (about 2.5 KiB: a node of 8 ranks)")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args(argv)
    import torch
    import torch.distributed as dist
    server, port = start_server()
    try:
        store = dist.TCPStore("127.0.0.1", port, 1, False, datetime.timedelta(seconds=30))
        key = lambda *p: _relay.PREFIX + "/".join(str(x) for x in p)  # noqa: E731 (relay.StoreRelay._key)
        body = base64.b64encode(os.urandom(a.bytes * 3 // 4)).decode()
        for s in range(1, a.nodes + 1):
            store.set(key("node", s), '{"host": "node%d", "window": 1}\n%s' % (s, body))
            store.add(key("node_ready", s), 1)
        tmp = tempfile.mkdtemp(prefix="fetch-reads-")
        relay = _relay.StoreRelay(tmp, 0, "bench", 1.0, 5.0, store_factory=lambda: store)
        relay.store = store
        slots = list(range(1, a.nodes + 1))
        rows = {"one_by_one": [], "batched": [], "write": []}
        for _ in range(a.repeat):
            t = time.perf_counter()
            for s in slots:
                int(store.add(key("node_ready", s), 0))
                store.get(key("node", s))
            rows["one_by_one"].append(time.perf_counter() - t)
            t = time.perf_counter()
            for i in range(0, len(slots), _relay.FETCH_BATCH):
                batch = slots[i:i + _relay.FETCH_BATCH]
                relay._counters(batch)  # the first repeat makes them this relay's: add; then multi_get
                relay._reads([key("node", s) for s in batch])
            rows["batched"].append(time.perf_counter() - t)
            dd = _dumpdir.DumpDir(tmp)
            t = time.perf_counter()
            for s in slots:
                dd.write_json(_dumpdir.node_states_name(s), _documents.node_states_json("node%d" % s, "g", packed=body))
            rows["write"].append(time.perf_counter() - t)
        multi = bool(relay._multi_get)
    finally:
        server.stdin.close()
        server.wait()
    ms = {k: round(median(v[1:] or v) / a.nodes * 1e3, 4) for k, v in rows.items()}
    out = {"torch": torch.__version__, "date": today(), "nodes": a.nodes, "bytes": a.bytes, "repeat": a.repeat,
           "fetch_batch": _relay.FETCH_BATCH, "multi_get": multi, "ms_a_bundle": ms,
           "seconds": {k: [round(x, 4) for x in v] for k, v in rows.items()}}
    print("torch %s, %d bundles of %d bytes, multi_get %s: ms a bundle (median of repeats 2-%d): read one by one %.3f, "
          "read batched %.3f, write %.3f" % (torch.__version__, a.nodes, a.bytes, "used" if multi else "absent",
                                             a.repeat, ms["one_by_one"], ms["batched"], ms["write"]))
    write_json(os.path.join(RESULTS, "fetch_reads_%s_%s.json" % (torch.__version__.split("+")[0], today())), out)
    return out


if __name__ == "__main__":
    main()
