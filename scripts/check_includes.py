#!/usr/bin/env python3
"""Fails on any include cycle between the files of server/ and kernels/, and on includes not
written the one way (quoted, from the repository root: "server/http/respond.h").

A module is a file's path without its extension, so foo.c and foo.h are one node: foo depends on
bar when foo.c or foo.h includes bar.h. A cycle means two modules each need the other (a handler
that calls back into the file that dispatches to it), which is what `make test` forbids.

    scripts/check_includes.py [ROOT]      exit 0: acyclic; 1: cycles or stray includes, listed
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
DIRS = ("server", "kernels")
SOURCES = (".c", ".h", ".cu", ".cuh")


def generated(root, inc):
    """protoc-c's header of a .proto of the tree ("api/grpc/x.pb-c.h" for api/grpc/x.proto): made
    in the build directory, named from the repository root like every other include."""
    return inc.endswith(".pb-c.h") and os.path.exists(os.path.join(root, inc[:-len(".pb-c.h")] + ".proto"))


def modules(root):
    """{module: set of modules it includes}, and the list of includes not rooted at the repo."""
    graph, stray = {}, []
    for top in DIRS:
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if not f.endswith(SOURCES):
                    continue
                path = os.path.relpath(os.path.join(d, f), root)
                node = os.path.splitext(path)[0]
                deps = graph.setdefault(node, set())
                with open(os.path.join(root, path), encoding="utf-8") as fh:
                    for inc in INCLUDE.findall(fh.read()):
                        if generated(root, inc):
                            continue
                        if not os.path.exists(os.path.join(root, inc)):
                            stray.append(f"{path}: \"{inc}\" is not a path from the repository root")
                            inc = os.path.normpath(os.path.join(os.path.dirname(path), inc))
                            if not os.path.exists(os.path.join(root, inc)):
                                continue
                        dep = os.path.splitext(inc)[0]
                        if dep != node and dep.startswith(DIRS):
                            deps.add(dep)
    return graph, stray


def cycles(graph):
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    graph, stray = modules(root)
    found = cycles(graph)
    for comp in found:
        print("include cycle: " + " <-> ".join(comp))
        for m in comp:
            back = sorted(d for d in graph[m] if d in comp)
            print(f"  {m} includes {', '.join(back)}")
    for s in stray:
        print("stray include: " + s)
    print(f"check_includes: {len(graph)} modules, {len(found)} cycles, {len(stray)} stray includes")
    return 1 if found or stray else 0


if __name__ == "__main__":
    sys.exit(main())
