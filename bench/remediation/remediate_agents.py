#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The node agents and executors of bench/remediation/run.sh, played through kubectl.

  remediate_agents.py FAULTY_NODES_FILE OUT.json

Writes an uncorrectable ECC error on GPU 0 of each node listed (gpuop.dev/gpu-health, as the
node status exporter writes it), then, until every one is back in service: answers each node's
reset request (remediation.gpuop.dev/request-done, as `gpuop driver-manager remediate` does once
the GPU is reset), reports the GPU healthy after the reset and applies the operator's
acknowledgement (remediation.gpuop.dev/ack-seq) as the agent does. OUT gets the number of
writes it made (the bench subtracts them from the API server's count). Exit 1 after 600 s.
"""
import json
import subprocess
import sys
import time

P = "remediation.gpuop.dev/"
HEALTH = "gpuop.dev/gpu-health"


def rfc3339_ms(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % int(t * 1000 % 1000)


def annotate_all(writes):
    """Writes [(node, key, value)...] at once, as each node's own agent would: one kubectl each,
    run side by side."""
    procs = [subprocess.Popen(["kubectl", "annotate", "node", n, "--overwrite", f"{k}={v}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for n, k, v in writes]
    for p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"kubectl annotate: {err.decode().strip()}")


def fault(node, t):
    f = {"action": "reset-gpu", "class": "ecc-dbe", "code": 0, "gpu": 0, "live": True,
         "message": "GPU 0: uncorrectable ECC errors", "seq": 1, "since": rfc3339_ms(t),
         "uuid": "GPU-0"}
    return json.dumps({"acked": 0, "action": "reset-gpu", "faults": [f], "healthy": False,
                       "last": f, "seq": 1}, separators=(",", ":"))


def healthy(acked):
    return json.dumps({"acked": acked, "action": "none", "faults": [], "healthy": True,
                       "seq": 1}, separators=(",", ":"))


def main():
    nodes = [line.strip() for line in open(sys.argv[1]) if line.strip()]
    for n in nodes:  # one at a time: each fault stamped just before its own write
        annotate_all([(n, HEALTH, fault(n, time.time()))])
    writes = len(nodes)
    answered, reported, acked, done = {}, {}, {}, set()
    deadline = time.time() + 600
    while len(done) < len(nodes):
        if time.time() > deadline:
            print(f"timed out: {len(done)} of {len(nodes)} back in service", file=sys.stderr)
            return 1
        out = subprocess.run(["kubectl", "get", "nodes", *nodes, "-o", "json"], check=True,
                             capture_output=True, text=True).stdout
        todo = []  # this round's writes: at most one per node, as its agents would make them
        for o in json.loads(out)["items"]:
            n = o["metadata"]["name"]
            ann = o["metadata"].get("annotations", {})
            state = o["metadata"].get("labels", {}).get(P + "state", "")
            req = ann.get(P + "request", "").split()
            ack = ann.get(P + "ack-seq")
            if len(req) >= 2 and req[0] == "reset-gpu" and answered.get(n) != req[1]:
                todo.append((n, P + "request-done", req[1]))  # the executor, the GPU reset
                answered[n] = req[1]
            elif n in answered and n not in reported:
                # the agent: NVML shows the GPU clean after the reset
                todo.append((n, HEALTH, healthy(int(ann.get(P + "ack-seq", "0") or 0))))
                reported[n] = True
            elif n in reported and ack and acked.get(n) != ack:
                todo.append((n, HEALTH, healthy(int(ack))))  # the agent applies the ack
                acked[n] = ack
            elif (n in answered and not state and ann.get(P + "recovered-at") and
                    not o.get("spec", {}).get("unschedulable")):
                done.add(n)
        annotate_all(todo)
        writes += len(todo)
        if not todo:
            time.sleep(0.3)
    json.dump({"writes": writes}, open(sys.argv[2], "w"))
    print(f"{len(done)} nodes back in service; {writes} writes by the played agents")
    return 0


if __name__ == "__main__":
    sys.exit(main())
