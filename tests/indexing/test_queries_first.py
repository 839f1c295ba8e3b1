"""Query embedding is never starved by bulk embedding in the same process: the
local backend's inference lock lets a waiting query go before the queued bulk batches."""

from __future__ import annotations

import threading
import time

from indexing.llm.local import QueriesFirst


def _waiter(lock, order, name, *, query):
    def run():
        with lock.hold(query=query):
            order.append(name)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _wait_until(condition):
    deadline = time.monotonic() + 5
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.001)


def test_a_waiting_query_goes_before_waiting_bulk_batches():
    lock, order = QueriesFirst(), []
    with lock.hold(query=False):  # a bulk batch runs
        bulk = [_waiter(lock, order, f"bulk{i}", query=False) for i in range(3)]
        time.sleep(0.02)  # the bulk batches queue first
        query = _waiter(lock, order, "query", query=True)
        _wait_until(lambda: lock._queries_waiting == 1)
    for thread in [query, *bulk]:
        thread.join(5)
    assert order[0] == "query" and sorted(order[1:]) == ["bulk0", "bulk1", "bulk2"]


def test_one_inference_at_a_time():
    lock, inside, most = QueriesFirst(), [0], [0]
    guard = threading.Lock()

    def work(query):
        for _ in range(20):
            with lock.hold(query=query):
                with guard:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                time.sleep(0.0005)
                with guard:
                    inside[0] -= 1

    threads = [threading.Thread(target=work, args=(i % 2 == 0,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert most[0] == 1
