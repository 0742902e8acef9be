"""tests/serve/load_test.py BRRR CHECKPOINT [--clients N] [--seconds S] [--slots K] [--measure C1,C2,...] [--stalled M]
                          [--device cpu|cuda|emulator]

Load on loopback, bounded in count and time. Every request is first run alone (its reference);
then N clients stream completions for S seconds, each picking requests of mixed lengths, and
about one in eight hangs up after a few events. Checks: no error, no request lost (every one
that was not hung up on ends with finish_reason and [DONE]), and every finished completion's
text and token logprobs equal its alone-run, bit for bit (the JSON numbers as written).

--measure 1,8,32 instead measures, for each concurrency C: C clients each sending the same
requests for S seconds, and prints tokens/s, time to first token p50/p99 and inter-token
latency p50/p99 (the figures of docs/measurements.md), and the CPU time per token of the server
and of these clients, which share the machine's cores with it. The ctest entry (label slow) is the
short form: 16 clients, 8 seconds, beside 1,000 stalled connections.

--stalled M opens M connections that each send half a request and wait (tests/serve/stalled.py)
and times GET /health beside them (it must answer within 1 s). With --measure, each concurrency
is measured twice, without them and with them, one after the other; without --measure, the load
runs beside them and its checks hold as before.
"""
import argparse
import http.client
import json
import os
import random
import statistics
import sys
import threading
import time

from harness import Server
from stalled import close_all, open_stalled, time_health

PROMPTS = ["ROMEO:", "JULIET:\nO", "First Citizen:\nBefore we proceed any further, hear me speak.", "A", "KING HENRY",
           "To be, or not", "Good morrow, cousin.", "\n"]


def make_requests(rng, count, block_size):
    out = []
    for i in range(count):
        prompt = rng.choice(PROMPTS)
        out.append({"prompt": prompt, "max_tokens": rng.choice([1, 4, 16, 32, 48]) if block_size >= 64 else 8,
                    "temperature": rng.choice([0, 0.7, 1.0]), "seed": 1000 + i, "logprobs": rng.choice([None, 2]),
                    "top_k": rng.choice([0, 10])})
    return out


def stream(port, body, hang_up_after=None):
    """Streams one completion. Returns (text, token_logprobs, finish_reason, ttft, token times), or
    None when it hung up on purpose."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    start = time.perf_counter()
    conn.request("POST", "/v1/completions", body=json.dumps(dict(body, stream=True)),
                 headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    if r.status != 200:
        raise AssertionError(f"status {r.status}: {r.read()[:300]}")
    text, logprobs, finish, times, events, done = "", [], None, [], 0, False
    buffer = b""
    while not done:
        chunk = r.read1(65536) if hasattr(r, "read1") else r.read(1)
        if not chunk:
            break
        buffer += chunk
        while b"\n\n" in buffer:
            event, buffer = buffer.split(b"\n\n", 1)
            data = event[len(b"data: "):]
            if data == b"[DONE]":
                done = True
                break
            e = json.loads(data)
            events += 1
            if hang_up_after is not None and events >= hang_up_after:
                conn.close()
                return None
            for c in e["choices"]:
                text += c["text"]
                if c["logprobs"]:
                    logprobs += [json.dumps(x) for x in c["logprobs"]["token_logprobs"]]
                n = len(c["logprobs"]["tokens"]) if c["logprobs"] else 1
                times += [time.perf_counter() - start] * n
                if c["finish_reason"]:
                    finish = c["finish_reason"]
    conn.close()
    if not done or finish is None:
        raise AssertionError(f"stream ended without finish_reason or [DONE]: {text!r}")
    return text, logprobs, finish, times


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")


def load(s, requests, clients, seconds, rng_seed):
    reference = [stream(s.port, r) for r in requests]
    errors, finished, hung_up = [], [0], [0]
    lock = threading.Lock()
    end = time.time() + seconds

    def client(k):
        rng = random.Random(rng_seed * 1000 + k)
        while time.time() < end:
            i = rng.randrange(len(requests))
            hang = rng.randrange(1, 4) if rng.random() < 0.125 else None
            try:
                got = stream(s.port, requests[i], hang)
            except Exception as e:  # noqa: BLE001 - every failure is reported
                with lock:
                    errors.append(f"request {i}: {e}")
                continue
            with lock:
                if got is None:
                    hung_up[0] += 1
                elif got[:3] != reference[i][:3]:
                    errors.append(f"request {i}: {got[:3]} differs from its alone-run {reference[i][:3]}")
                else:
                    finished[0] += 1

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors, finished[0], hung_up[0]


def cpu_seconds(pid):
    """User + system CPU seconds of process pid so far (Linux's /proc/PID/stat), all its threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(s, requests, concurrency, seconds):
    """Returns tokens/s, TTFT and inter-token latencies, the number of requests, and the CPU
    seconds per token that the server and these clients spent (they share the machine's cores)."""
    results, lock = [], threading.Lock()
    end = time.time() + seconds
    server_cpu, own = cpu_seconds(s.proc.pid), os.times()
    start = time.perf_counter()

    def client(k):
        i = k
        while time.time() < end:
            got = stream(s.port, requests[i % len(requests)])
            i += concurrency
            with lock:
                results.append(got)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    server_cpu = cpu_seconds(s.proc.pid) - server_cpu
    clients_cpu = sum(os.times()[:2]) - sum(own[:2])
    tokens = sum(len(r[3]) for r in results)
    ttft = [r[3][0] for r in results if r[3]]
    itl = [b - a for r in results for a, b in zip(r[3], r[3][1:])]
    return tokens / wall, ttft, itl, len(results), server_cpu / tokens, clients_cpu / tokens


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("brrr")
    ap.add_argument("checkpoint")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--slots", type=int, default=8)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--measure", default="")
    ap.add_argument("--stalled", type=int, default=0)
    ap.add_argument("--device", default="cpu", help="brrr serve's --device (cuda: the GPU's serving bar)")
    a = ap.parse_args()
    args = ["--slots", str(a.slots), "--queue", "256", "--threads", str(a.threads), "--device", a.device]
    with Server(a.brrr, a.checkpoint, *args) as s:
        block_size = json.loads(s.get("/v1/models")[2])["data"][0]["meta"]["n_ctx"]
        if a.measure:
            # Fixed work per request: greedy, 32 tokens (or what the context allows), no stop.
            reqs = [{"prompt": p, "max_tokens": min(32, block_size - 16), "temperature": 0} for p in PROMPTS]
            for c in [int(x) for x in a.measure.split(",")]:
                for stalled in ([0, a.stalled] if a.stalled else [0]):
                    held = open_stalled(s.port, stalled) if stalled else []
                    beside = f" beside {stalled} stalled" if stalled else ""
                    tps, ttft, itl, n, server_cpu, clients_cpu = measure(s, reqs, c, a.seconds)
                    close_all(held)
                    print(f"concurrency {c:3d}{beside}: {n:5d} requests, {tps:8.1f} tokens/s, TTFT p50 {percentile(ttft, 50) * 1e3:7.1f} ms "
                          f"p99 {percentile(ttft, 99) * 1e3:7.1f} ms, inter-token p50 {percentile(itl, 50) * 1e3:6.2f} ms "
                          f"p99 {percentile(itl, 99) * 1e3:6.2f} ms; CPU per token: server {server_cpu * 1e6:.0f} us, "
                          f"clients {clients_cpu * 1e6:.0f} us", flush=True)
            return
        requests = make_requests(random.Random(7), 24, block_size)
        held = open_stalled(s.port, a.stalled) if a.stalled else []
        health = time_health(s.port) if a.stalled else None
        errors, finished, hung_up = load(s, requests, a.clients, a.seconds, 1)
        if a.stalled:
            print(f"{a.stalled} stalled connections: GET /health status {health[0]} in {health[1]:.3f} s", flush=True)
            if health[0] != 200 or health[1] >= 1.0:
                errors.append(f"GET /health beside {a.stalled} stalled connections: {health[0]} in {health[1]:.3f} s")
        close_all(held)
        status, _, metrics = s.get("/metrics")
    for e in errors[:10]:
        print("ERROR", e)
    print(f"load: {a.clients} clients for {a.seconds:g} s: {finished} completions equal to their alone-runs, "
          f"{hung_up} hung up on purpose, {len(errors)} errors")
    if errors or finished == 0:
        sys.exit(1)


if __name__ == "__main__":
    main()
