"""A ``TCPStore`` server holding one connection per node, to 12,500 nodes (100,000 ranks): what the connections
themselves cost it (issue 44).

Every node's relay keeps one store client open for the job's life (docs/scale.md: one connection per node, the
relays of the other ranks open none), so at 100,000 ranks the store torchrun's agent serves holds 12,500 of
them beside the job's own.  ``store_load.py`` measures the observer's operations to 2,048 nodes (its harness
steps every relay in one thread, which 12,500 would outrun); this measures the connections: a real
``TCPStore`` server in a process of its own (``scale.start_server``, torch's default server of the line
installed), and N real store clients over TCP, opened by ``--procs`` processes of this script, each holding its
share open.  Per size:

- the time to open them all (each client's constructor, one at a time per process, the processes together);
- the server's resident memory and its open sockets once they are open;
- the server's CPU (user + system, /proc) while they are open and nothing is sent, over ``--seconds``;
- the same with ``--rate`` operations a second spread over every connection (each an ``add`` of 0 to a key of
  its own, as a relay's poll is; the idle load the model gives at 12,500 nodes is at most about 456 a second:
  256 counter reads and the arrivals exchange's 200), and the latency of those operations as the clients saw
  them (median, p99; this script's processes share the machine's cores with the server).

    python benchmarks/store_connections.py                          # 2,048 and 12,500 connections
    python benchmarks/store_connections.py --connections 12500 --seconds 20 --rate 500

Not in this: a gather (scale.py), a store server on another machine than its clients, the job's own traffic.
"""
import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _harness import RESULTS, summary, today, write_json  # noqa: E402
from scale import RESOLVER_ENV, server_connections, server_cpu_s, start_server  # noqa: E402

CLIENT = "client"


def _rss_mib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return None


def _open_client(port):
    import datetime
    import torch.distributed as d
    t = datetime.timedelta(seconds=300)
    try:
        return d.TCPStore("127.0.0.1", port, None, False, t)
    except (TypeError, RuntimeError, ValueError):
        return d.TCPStore("127.0.0.1", port, 1, False, t)  # torch 1.x: world_size an int


def client_main(port, n, index):
    """A client process: opens ``n`` clients, says so, then for each command line ("load RATE SECONDS" or
    "quit") sends RATE operations a second spread over its clients for SECONDS and answers their latencies."""
    t0 = time.monotonic()
    stores = [_open_client(port) for _ in range(n)]
    print(json.dumps({"opened": n, "open_s": time.monotonic() - t0}), flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        rate, seconds = float(words[1]), float(words[2])
        lat, i, k = [], 0, 0
        start = time.monotonic()
        while True:
            due = start + k / rate
            now = time.monotonic()
            if due - start >= seconds:
                break
            if due > now:
                time.sleep(due - now)
            s = stores[i]
            t = time.perf_counter()
            s.add("c10d_observer/bench/conn%d-%d" % (index, i), 0)
            lat.append(time.perf_counter() - t)
            i, k = (i + 1) % n, k + 1
        print(json.dumps({"ops": len(lat), "lat": lat}), flush=True)


def _measure(n, procs, seconds, rate):
    server, port = start_server()
    pid = server.pid
    cpu0, rss0 = server_cpu_s(pid), _rss_mib(pid)
    share = [n // procs + (1 if i < n % procs else 0) for i in range(procs)]
    t0 = time.monotonic()
    clients = [subprocess.Popen([sys.executable, __file__, CLIENT, str(port), str(k), str(i)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, universal_newlines=True) for i, k in enumerate(share) if k]
    opened = [json.loads(c.stdout.readline()) for c in clients]
    open_s = time.monotonic() - t0
    row = {"connections": n, "client_procs": len(clients), "open_s": round(open_s, 2),
           "open_s_per_proc_max": round(max(o["open_s"] for o in opened), 2),
           "server_sockets": server_connections(pid), "server_rss_mib_before": round(rss0, 1),
           "server_rss_mib": round(_rss_mib(pid), 1), "server_cpu_s_opening": round(server_cpu_s(pid) - cpu0, 2)}
    c0, w0 = server_cpu_s(pid), time.monotonic()
    time.sleep(seconds)
    row["idle_cpu_share"] = round((server_cpu_s(pid) - c0) / (time.monotonic() - w0), 4)
    c0, w0 = server_cpu_s(pid), time.monotonic()
    for c in clients:
        c.stdin.write("load %f %f\n" % (rate / len(clients), seconds))
        c.stdin.flush()
    got = [json.loads(c.stdout.readline()) for c in clients]
    wall = time.monotonic() - w0
    lat = [x for g in got for x in g["lat"]]
    row.update({"rate": rate, "ops": len(lat), "ops_per_s": round(len(lat) / wall, 1),
                "load_cpu_share": round((server_cpu_s(pid) - c0) / wall, 4)})
    row.update(dict((k, round(v, 3)) for k, v in summary(lat, scale=1000.0, keys=("median", "p99", "max"),
                                                          prefix="lat_ms_").items()))
    for c in clients:
        c.stdin.write("quit\n")
        c.stdin.flush()
        c.wait()
    server.stdin.close()
    server.wait()
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--connections", default="2048,12500", help="comma-separated counts (default 2048,12500)")
    ap.add_argument("--procs", type=int, default=8, help="client processes sharing the connections (default 8)")
    ap.add_argument("--seconds", type=float, default=20.0, help="each phase, idle and loaded (default 20)")
    ap.add_argument("--rate", type=float, default=500.0, help="operations a second in the loaded phase (500)")
    ap.add_argument("--out", help="results file (default results/store_connections_torch<V>.json)")
    a = ap.parse_args(argv)
    import torch
    sizes = [int(x) for x in a.connections.split(",")]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < max(sizes) + 64:
        sys.exit("--connections %d: this machine lets a process open %d files (ulimit -Hn); the server needs one "
                 "per connection" % (max(sizes), hard))
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # inherited by the server and the clients
    os.environ.update(RESOLVER_ENV)  # this VM has no DNS: torch's client looks up its socket's name at each connect
    rows = []
    for n in sizes:
        row = _measure(n, a.procs, a.seconds, a.rate)
        rows.append(row)
        print("%6d connections: opened in %.1f s (%d processes), server %d sockets, %.1f MiB (%.1f before), CPU "
              "idle %.2f %% of a core, at %.0f ops/s %.2f %%, latency median %.3f ms, p99 %.3f ms" % (
                  n, row["open_s"], row["client_procs"], row["server_sockets"], row["server_rss_mib"],
                  row["server_rss_mib_before"], 100 * row["idle_cpu_share"], row["ops_per_s"],
                  100 * row["load_cpu_share"], row["lat_ms_median"], row["lat_ms_p99"]))
        sys.stdout.flush()
    out = a.out or os.path.join(RESULTS, "store_connections_torch%s.json" % torch.__version__.split("+")[0])
    write_json(out, {"command": "python benchmarks/store_connections.py --connections %s --procs %d --seconds %g "
                                "--rate %g" % (a.connections, a.procs, a.seconds, a.rate),
                     "date": today(), "torch": torch.__version__, "python": platform.python_version(),
                     "machine": "%s, %d cores" % (platform.machine(), os.cpu_count() or 0), "rows": rows})
    print("results: %s" % os.path.relpath(out))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == CLIENT:
        client_main(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    else:
        main()
