"""call-circles.py: find files that call one another in a circle.

  python3 t/call-circles.py DIR...

For each DIR (src/sidecar, src/tui), every non-static function defined in
one of its .c files is an edge from each other file of DIR that names it
(comments and string literals removed first). A set of files that reach one
another through such edges is a circle: layering runs one way, so each is a
fault to undo (issue 25). Circles listed in KNOWN are reported but allowed,
so that lint fails on a new one while the known one is being undone; any
other circle makes the exit status 1.
"""
import collections
import glob
import re
import sys

# The agent wing's core: agent.c -> dispatch.c -> runner.c -> dispatch.c.
KNOWN = [
    {"src/sidecar/agent/agent.c", "src/sidecar/agent/dispatch.c",
     "src/sidecar/agent/runner.c", "src/sidecar/agent/tx.c"},
]

COMMENT = re.compile(r"/\*.*?\*/", re.S)
STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')
DEFINITION = re.compile(r"^(?!static)[a-z][^\n;(=]*?\b([a-z_][a-z0-9_]*)\(", re.M)


def code_of(path):
    with open(path) as f:
        text = f.read()
    text = COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return STRING.sub('""', text)


def call_graph(files):
    code = {f: code_of(f) for f in files}
    defined_in = {}
    for f, text in code.items():
        for m in DEFINITION.finditer(text):
            defined_in.setdefault(m.group(1), f)
    graph = collections.defaultdict(set)
    for f, text in code.items():
        for name, home in defined_in.items():
            if home != f and re.search(r"\b%s\b" % name, text):
                graph[f].add(home)
    return graph


def circles(files, graph):
    """Tarjan's strongly connected components of more than one file."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(files):
        if v not in index:
            visit(v)
    return found


def main(dirs):
    status = 0
    for d in dirs:
        files = sorted(glob.glob(d.rstrip("/") + "/**/*.c", recursive=True))
        for comp in circles(files, call_graph(files)):
            known = any(comp <= k for k in KNOWN)
            print("%s: a call circle of %d files%s: %s" % (
                d, len(comp), " (known, issue 25)" if known else "", " ".join(sorted(comp))))
            if not known:
                status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["src/sidecar", "src/tui"]))
