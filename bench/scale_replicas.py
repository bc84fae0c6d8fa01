"""Replicas benchmark: several `deepfield serve` processes on one store in a bucket (moto's S3
server on loopback, as the S3 stand-in) under a mixed load of concurrent clients.

    .venv/bin/python bench/scale_replicas.py                 # 3 replicas x 8 clients x 200
    .venv/bin/python bench/scale_replicas.py --clients 2 --requests 20 --docs -   # quick

The store uses the LanceDB index backend (its dataset in the bucket, one replica indexing
under the lease) and the tests' fake embedder. Each client creates pages of its own, reads and
updates them with If-Match, searches, and races every other client on one shared page with
If-Match updates (tests/replicas.py has the load and the checks). Meanwhile a probe writes a
page through one replica after another and times how long until every replica's search finds
it. Reported: requests by outcome, lost writes (an acknowledged write that is not what the
bucket holds), silent overwrites (two acknowledged updates of the shared page made from the
same version), write-to-searchable delay on every replica, and whether every page created
is found by every replica at the end.

Writes bench/out/scale_replicas.json and the section between ``<!-- replicas:start -->`` and
``<!-- replicas:end -->`` of docs/SCALE.md. Timings depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
sys.path[:0] = [str(BENCH_DIR), str(REPO)]

from evalkit.report import write_marked  # noqa: E402

from tests.replicas import (  # noqa: E402
    lost_writes,
    mixed_load,
    page,
    probe_visibility,
    start_replicas,
    unfound,
)

CONFIG = (b'[embedding]\nbackend = "fake"\n\n[index]\nbackend = "lancedb"\n\n'
          b'[server]\nbackfill = false\n')
MARK_START = "<!-- replicas:start -->"
MARK_END = "<!-- replicas:end -->"


def run(args: argparse.Namespace) -> dict[str, Any]:
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    cache = tempfile.mkdtemp(prefix="deepfield-replicas-")
    env = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint,
           "AWS_EC2_METADATA_DISABLED": "true", "XDG_CACHE_HOME": cache}
    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="bench",
                          aws_secret_access_key="bench", region_name="us-east-1")
    client.create_bucket(Bucket="replicas")
    client.put_object(Bucket="replicas", Key="team/deepfield.toml", Body=CONFIG)
    client.put_object(Bucket="replicas", Key="team/notes/", Body=b"")
    client.put_object(Bucket="replicas", Key="team/notes/shared.md", Body=page("Shared", "."))
    started = time.monotonic()
    replicas = start_replicas("s3://replicas/team", args.replicas, env)
    startup = time.monotonic() - started
    print(f"{args.replicas} replicas serving after {startup:.1f} s", file=sys.stderr)
    try:
        # The probe alone first (how fast a write spreads with nothing else going on), then
        # the probe under the load.
        idle: tuple[list[float], list[float]] = ([], [])
        if args.idle_seconds > 0:
            stop = threading.Event()
            probe = threading.Thread(target=probe_visibility, args=(replicas, stop, idle[0]),
                                     kwargs={"vector_delays": idle[1]})
            probe.start()
            time.sleep(args.idle_seconds)
            stop.set()
            probe.join()
        stop, delays, vector_delays = threading.Event(), [], []
        probe = threading.Thread(target=probe_visibility, args=(replicas, stop, delays),
                                 kwargs={"vector_delays": vector_delays})
        probe.start()
        report = mixed_load(replicas, args.clients, args.requests)
        stop.set()
        probe.join()

        def stored(name: str) -> bytes | None:
            try:
                return bytes(client.get_object(Bucket="replicas",
                                               Key=f"team/notes/{name}")["Body"].read())
            except client.exceptions.NoSuchKey:
                return None

        lost = lost_writes(report, stored)
        missing = unfound(replicas, report, wait=30)
    finally:
        for replica in replicas:
            replica.stop()
        server.stop()
    total = sum(report.requests.values())
    return {
        "replicas": args.replicas, "clients_per_replica": args.clients,
        "requests_per_client": args.requests, "requests": total,
        "seconds": round(report.seconds, 1), "requests_per_s": round(total / report.seconds, 1),
        "startup_s": round(startup, 1), "outcomes": dict(sorted(report.requests.items())),
        "errors": report.errors[:20], "error_count": len(report.errors),
        "lost_writes": len(lost), "lost": lost[:20],
        "acknowledged_pages": len(report.acknowledged),
        "shared_updates": len(report.shared_wins),
        "silent_overwrites": len(report.shared_wins) - len(set(report.shared_wins)),
        "visibility_probes": len(delays),
        "visibility_p50_s": round(float(np.median(delays)), 2) if delays else None,
        "visibility_max_s": round(max(delays), 2) if delays else None,
        "vector_visibility_p50_s": round(float(np.median(vector_delays)), 2)
        if vector_delays else None,
        "vector_visibility_max_s": round(max(vector_delays), 2) if vector_delays else None,
        "idle_probes": len(idle[0]),
        "idle_visibility_p50_s": round(float(np.median(idle[0])), 2) if idle[0] else None,
        "idle_visibility_max_s": round(max(idle[0]), 2) if idle[0] else None,
        "idle_vector_visibility_p50_s": round(float(np.median(idle[1])), 2) if idle[1] else None,
        "idle_vector_visibility_max_s": round(max(idle[1]), 2) if idle[1] else None,
        "created_pages": len(report.created), "unfound_at_end": len(missing),
        "when": time.strftime("%Y-%m-%d"), "load": round(os.getloadavg()[0], 1),
        "command": "python bench/scale_replicas.py " + " ".join(sys.argv[1:]),
    }


def render(r: dict[str, Any]) -> str:
    outcomes = ", ".join(f"{k}: {v}" for k, v in r["outcomes"].items())
    return "\n".join([
        MARK_START, "",
        f"Measured {r['when']} (load {r['load']}), `{r['command']}`: {r['replicas']} replicas "
        f"x {r['clients_per_replica']} clients x {r['requests_per_client']} mixed requests on "
        f"moto's S3 server on loopback, LanceDB backend, fake embedder.", "",
        "| measure | result |", "|---|---|",
        f"| requests (outcome: count) | {r['requests']} in {r['seconds']} s "
        f"({r['requests_per_s']}/s); {outcomes} |",
        f"| client errors (timeouts, refused) | {r['error_count']} |",
        f"| lost writes (acknowledged, not what the bucket holds) | {r['lost_writes']} of "
        f"{r['acknowledged_pages']} pages |",
        f"| silent overwrites of the shared page | {r['silent_overwrites']} of "
        f"{r['shared_updates']} acknowledged updates |",
        *([f"| no load: write → found by every replica's keyword search (probe) | p50 "
           f"{r['idle_visibility_p50_s']} s, max {r['idle_visibility_max_s']} s over "
           f"{r['idle_probes']} probes |",
           f"| no load: write → found by every replica's vector search (its vectors from the "
           f"indexer) | p50 {r['idle_vector_visibility_p50_s']} s, max "
           f"{r['idle_vector_visibility_max_s']} s |"] if r.get("idle_probes") else []),
        f"| under the load: write → found by every replica's keyword search (probe) | p50 "
        f"{r['visibility_p50_s']} s, max {r['visibility_max_s']} s over "
        f"{r['visibility_probes']} probes |",
        *([f"| under the load: write → found by every replica's vector search (its vectors "
           f"from the indexer; the probe waits 60 s at most) | p50 "
           f"{r['vector_visibility_p50_s']} s, max {r['vector_visibility_max_s']} s |"]
          if r.get("vector_visibility_p50_s") is not None else []),
        f"| pages created not found by some replica at the end | {r['unfound_at_end']} of "
        f"{r['created_pages']} |",
        f"| replicas started and serving | {r['startup_s']} s |",
        "", MARK_END])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--clients", type=int, default=8, help="clients per replica")
    parser.add_argument("--requests", type=int, default=200, help="requests per client")
    parser.add_argument("--idle-seconds", type=float, default=30.0,
                        help="probe visibility alone this long before the load starts")
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "out" / "scale_replicas.json")
    parser.add_argument("--docs", type=Path, default=REPO / "docs" / "SCALE.md")
    args = parser.parse_args()
    result = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k not in ("errors", "lost")},
                     indent=1))
    if str(args.docs) != "-":
        write_marked(args.docs, render(result))


if __name__ == "__main__":
    main()
