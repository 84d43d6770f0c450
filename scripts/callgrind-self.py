#!/usr/bin/env python3
"""Self cost (instructions) per function from one callgrind dump, per request.

A dump asked for mid-run (`callgrind_control -d`, after a `-z`) holds the right costs, but
callgrind_annotate files all of it under `clone`; this reads the dump itself. The dump must
name its functions in full: run valgrind with `--compress-strings=no`. For names beyond a
symbol table, a line-table build of the server (CARGO_PROFILE_RELEASE_DEBUG=line-tables-only).
Inlined functions count in their caller (`Worker::run` holds most of the worker).

usage: scripts/callgrind-self.py DUMP REQUESTS [TOP]
"""
import collections
import sys

if len(sys.argv) < 3:
    sys.exit(__doc__)
path, requests = sys.argv[1], int(sys.argv[2])
top = int(sys.argv[3]) if len(sys.argv) > 3 else 40
cost = collections.Counter()
fn = None
call_cost_next = False  # the line after `calls=` is the callee's inclusive cost: not ours
for line in open(path):
    if line.startswith("fn="):
        fn = line[3:].strip()
    elif line.startswith("calls="):
        call_cost_next = True
    elif line[:1].isdigit() or line[:1] in "+-*":
        if call_cost_next:
            call_cost_next = False
            continue
        parts = line.split()
        if len(parts) >= 2 and fn:
            cost[fn] += int(parts[1])
total = sum(cost.values())
print(f"total {total} Ir, {requests} requests, {total / requests:.0f} Ir/request\n")
print("Ir/request  share  function (self)")
for f, c in cost.most_common(top):
    print(f"{c / requests:10.1f} {100 * c / total:5.1f} %  {f[:150]}")
