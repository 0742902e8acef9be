"""tests/serve/stalled.py: connections that stall, for the load test and by hand (chapter 20).

    python3 tests/serve/stalled.py PORT [N]     # N connections that send half a request and wait,
                                                # then the time /health takes beside them

A stalled client has sent part of a request ("POST ... Content-Le") and nothing more: a server
with a thread per connection gives it a thread until its read times out; an event loop gives it
a socket and a few hundred bytes.
"""
import http.client
import resource
import socket
import sys
import time

HALF_REQUEST = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le"


def allow_open_files(n):
    """Raises this process's open-file limit to n (within the hard limit): one descriptor a connection."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(n, hard), hard))


def open_stalled(port, n):
    """n connections, each with half a request sent. Close them with close_all."""
    allow_open_files(n + 256)
    out = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(HALF_REQUEST)
        out.append(s)
    return out


def close_all(sockets):
    for s in sockets:
        s.close()


def time_health(port, timeout=60):
    """(status, seconds) of one GET /health."""
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", "/health")
        status = conn.getresponse().status
    except OSError as e:
        status = f"failed: {e}"
    finally:
        conn.close()
    return status, time.perf_counter() - start


if __name__ == "__main__":
    port, n = int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    stalled = open_stalled(port, n)
    print(f"{n} stalled connections open; GET /health: status %s in %.3f s" % time_health(port), flush=True)
    close_all(stalled)
