"""readme.py: regenerate README's performance paragraph from a `make bench`
run, so that its figures are the run's and never typed by hand.

  BENCH_SAVE=/tmp/bench.raw make bench      (or sh bench/run.sh; saves the run's @ lines)
  python3 bench/lib/readme.py /tmp/bench.raw [README]

It computes what bench/lib/table.sh computes (medians, ratios, met or not)
from the saved lines and replaces the paragraph that starts "Measured here
(`make bench`" and ends with "`make bench` prints the table." in README
(default: the README next to bench/). Pending rows are named as not
measured; figures without a target are given as measured."""
import datetime
import os
import re
import statistics
import sys
import textwrap

START = "Measured here (`make bench`"
END = "`make bench` prints the table."


def load(path):
    figs, order, s, b, pend = {}, [], {}, {}, {}
    with open(path) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if p[0] == "@fig" and len(p) >= 6:
                if p[1] not in figs:
                    order.append(p[1])
                figs[p[1]] = {"label": p[2], "blabel": p[3], "unit": p[4], "target": p[5]}
            elif p[0] in ("@s", "@b") and len(p) >= 3:
                try:
                    (s if p[0] == "@s" else b).setdefault(p[1], []).append(float(p[2]))
                except ValueError:
                    pass
            elif p[0] == "@pending" and len(p) >= 3:
                pend[p[1]] = p[2]
    return figs, order, s, b, pend


def fmt(v, unit):
    if unit == "req/s" or abs(v) >= 100:
        n = "%.0f" % v
    elif abs(v) >= 10:
        n = "%.1f" % v
    else:
        n = "%.2f" % v
    return n + ("" if unit in ("", "-") else " " + unit)


def judge(t, m, ratio):
    """(shown target, met: True/False/None)."""
    mt = re.match(r"ratio(<=|>=)([0-9.]+)$", t)
    if mt:
        x = float(mt.group(2))
        met = None if ratio is None else (ratio <= x if mt.group(1) == "<=" else ratio >= x)
        return "%s%sx" % (mt.group(1), mt.group(2)), met
    mt = re.match(r"([<>])([0-9.]+)$", t)
    if mt:
        x = float(mt.group(2))
        return t, (m < x if mt.group(1) == "<" else m > x)
    return "", None


def paragraph(path):
    figs, order, s, b, pend = load(path)
    items, missed, pending = [], [], []
    n_targets = n_met = 0
    for k in order:
        f = figs[k]
        if k in pend or not s.get(k):
            pending.append(f["label"])
            continue
        m = statistics.median(s[k])
        bm = statistics.median(b[k]) if b.get(k) else None
        ratio = m / bm if bm else None
        shown, met = judge(f["target"], m, ratio)
        text = f["label"] + " " + fmt(m, f["unit"])
        if ratio is not None:
            text += " (%.2fx %s" % (ratio, f["blabel"])
            text += "; target %s)" % shown if shown else ")"
        elif shown:
            text += " (target %s %s)" % (shown, f["unit"])
        if met is not None:
            n_targets += 1
            n_met += met
            if not met:
                missed.append(f["label"])
        items.append(text)
    date = datetime.datetime.fromtimestamp(os.path.getmtime(path), datetime.timezone.utc).strftime("%Y-%m-%d")
    out = "%s, one run of every figure against its baseline in the same run; %d cores, %s): " % (
        START, os.cpu_count() or 0, date)
    out += "; ".join(items) + ". "
    out += "%d of %d targets met" % (n_met, n_targets)
    if missed:
        out += " (missed: %s)" % ", ".join(missed)
    if pending:
        out += "; not measured in this run: %s" % ", ".join(pending)
    out += "; " + END
    return textwrap.fill(out, width=76, break_on_hyphens=False)


def main(argv):
    if len(argv) < 2:
        print("usage: readme.py SAVED-BENCH-OUTPUT [README]", file=sys.stderr)
        return 2
    readme = argv[2] if len(argv) > 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README")
    with open(readme) as f:
        lines = f.read().split("\n")
    try:
        a = next(i for i, l in enumerate(lines) if l.startswith(START))
        z = next(i for i in range(a, len(lines)) if END in lines[i])
    except StopIteration:
        print("readme.py: no paragraph from %r to %r in %s" % (START, END, readme), file=sys.stderr)
        return 1
    lines[a:z + 1] = paragraph(argv[1]).split("\n")
    with open(readme + ".tmp", "w") as f:
        f.write("\n".join(lines))
    os.replace(readme + ".tmp", readme)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
