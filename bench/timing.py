"""bench/timing.py: the timing rule every Python peer uses, the same as bench/bench_util.h:
warm up, repeat, take the median (robust to a stray slow run). Chapter 04 explains why."""
import time


def median_seconds(fn, repeats, warmup=2):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2]
