"""Registers a process that does not exist in an elastic job's next generation, so the
generation closes with a member that never builds its communicator: every real member's
communicator setup then fails (the tcp rendezvous misses that rank), exactly as when a
member is killed after the list closed, but at a point the test chose.

  phantom_arrival.py HOST PORT ID
      arrives as newcomer ID in generation current+1 (as ElasticRendezvous::form does:
      the counter, then the arrival key) and marks ID dead (as a launcher does when its
      process exits), so the generation after that one does not wait for it.

The token is COMM_JOB_TOKEN (the job's). Store access: store_probe.py.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from store_probe import Store  # noqa: E402


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    host, port, ident = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    store = Store(host, port, os.environ.get("COMM_JOB_TOKEN", ""))
    nxt = int(store.get("elastic/current")) + 1
    n = store.add(f"elastic/g{nxt}/arrived", 1)
    store.set(f"elastic/g{nxt}/arrival/{n - 1}", f"{ident} -1")
    store.set(f"elastic/dead/{ident}", "phantom_arrival.py: never existed")
    print(f"store: phantom {ident} arrived in generation {nxt}")


if __name__ == "__main__":
    main()
