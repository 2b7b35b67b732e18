#!/usr/bin/env python3
"""deps-verify.py: check that every external command the test, demo and bench
scripts call comes from a Debian package t/deps.sh lists (run by
`t/deps.sh --verify`, which passes the list).

    deps-verify.py --root DIR --packages "pkg:probe-file ..."
                   [--extra-packages "pkg:probe-file ..."] [--list] [--only] [FILE...]

A command is accounted for when it is a shell builtin or keyword, a function
the script (or a file it sources) defines, one of the project's own programs
(bin/, build/, the scripts, t/fakes/, python/.venv/bin from pip), or a file
in a bin directory of a listed package (dpkg -L, plus the probe file deps.sh
checks for it, which covers make for build-essential and a package that is
not installed) or of an Essential package (those are on every Debian system). Everything else is reported as "SCRIPT: CMD" and the
exit status is 1.

Shell is read with a small lexer, not a full parser: words in command
position (line start, after ; | & && || ( $( ` { and the keywords), past
assignments and prefix commands (env, exec, timeout, xargs, ...). Quoted text
is an argument, so what a script runs inside a container (docker exec ...
sh -c '...') is not taken for a host command; $(...) inside double quotes is
read. Here-document bodies are skipped as shell but searched, like Python
files, for subprocess calls with a literal program name.
"""
import argparse
import glob
import os
import re
import subprocess
import sys

BUILTINS = set("""
: . [ alias bg break cd command continue echo eval exec exit export false fg
getopts hash jobs kill local printf pwd read readonly return set shift test
times trap true type ulimit umask unalias unset wait
if then else elif fi case esac for while until do done in ! { } function
""".split())
# Words that put the next word in command position.
OPENERS = set("if then else elif do while until ! { time".split())
# Commands that run their (non-option) argument as a command; the value is
# how many leading non-option words are theirs (timeout's duration, chroot's
# directory).
PREFIX = {"exec": 0, "nohup": 0, "setsid": 0, "nice": 0, "sudo": 0,
          "stdbuf": 0, "timeout": 1, "chroot": 1, "xargs": 0, "env": 0,
          "command": 0}
# Options of the prefix commands that take a separate value.
PREFIX_OPTARG = {"xargs": {"-n", "-I", "-P", "-L", "-s", "-d", "-a", "-E"},
                 "timeout": {"-s", "-k", "--signal", "--kill-after"},
                 "env": {"-u", "-C", "--unset", "--chdir"},
                 "nice": {"-n"}, "stdbuf": {"-i", "-o", "-e"}}
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*$")
ASSIGN_RE = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*=")
FUNC_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z_0-9.-]*)\s*\(\)\s*(\{|\(|$)", re.M)
HEREDOC_RE = re.compile(r"<<(-?)\s*(['\"]?)([A-Za-z_][A-Za-z_0-9]*)\2")
SOURCE_RE = re.compile(r"^\s*(?:\.|source)\s+.*?([\w.-]+(?:/[\w.-]+)*\.sh)\b", re.M)
# Python: subprocess.run(["prog", ...]), Popen([...]), os.system("prog ..."),
# and the bench library's sh("prog", ...) / which("prog").
PY_RES = [
    re.compile(r"\b(?:subprocess\.\w+|Popen|check_output|check_call)\(\s*\[\s*[\"']([^\"'\s]+)[\"']"),
    re.compile(r"\bos\.system\(\s*[\"']([^\"'\s]+)"),
    re.compile(r"(?<![\w.])(?:B\.)?(?:sh|which)\(\s*[\"']([^\"'\s]+)[\"']"),
]
BIN_DIRS = ("/bin/", "/sbin/", "/usr/bin/", "/usr/sbin/", "/usr/local/bin/")


class Lexer:
    """Collects the words in command position of shell text (self.calls),
    skipping quoted arguments; here-document bodies go to self.heredocs."""

    def __init__(self, text):
        self.s = text
        self.i = 0
        self.heredocs = []
        self.pending = []  # here-document terminators opened on this line
        self.calls = []

    def skip_heredocs(self):
        # At a newline: the bodies of the here-documents opened on the line.
        for strip, term in self.pending:
            body = []
            while self.i < len(self.s):
                j = self.s.find("\n", self.i)
                j = len(self.s) if j < 0 else j
                line = self.s[self.i:j]
                self.i = j + 1
                if (line.lstrip("\t") if strip else line) == term:
                    break
                body.append(line)
            self.heredocs.append("\n".join(body))
        self.pending = []

    def words(self, closer=None):
        """Reads words until closer (')' for $( ), '`', '}' for ${ }) or the
        end of the text. Inside ${ } no word is a command (only the $( )
        within)."""
        s = self.s
        st = {"cmd": closer != "}", "case": 0, "pat": False, "for": False,
              "case_word": False, "prefix": None, "prefix_left": 0,
              "optarg": False, "redir": False, "word": "", "quoted": False,
              "depth": 0}

        def finish(end_of_command):
            w, q = st["word"], st["quoted"]
            st["word"], st["quoted"] = "", False
            if w or q:
                self.classify(w, q, st)
            if end_of_command:
                st["cmd"] = closer != "}"
                st["prefix"] = None
                st["for"] = False  # for NAME in WORDS ends at ; or newline

        while self.i < len(s):
            c = s[self.i]
            if closer and c == closer and not (closer == ")" and (st["depth"] or st["pat"])):
                self.i += 1
                finish(False)
                return
            if c == "\\":
                if s[self.i + 1:self.i + 2] == "\n":
                    self.i += 2
                    continue
                st["word"] += s[self.i:self.i + 2]
                self.i += 2
                continue
            if c == "#" and st["word"] == "" and not st["quoted"]:
                j = s.find("\n", self.i)
                self.i = len(s) if j < 0 else j
                continue
            if c == "'":
                j = s.find("'", self.i + 1)
                self.i = len(s) if j < 0 else j + 1
                st["quoted"] = True
                st["word"] += "Q"
                continue
            if c == '"':
                self.i += 1
                self.dquote()
                st["quoted"] = True
                st["word"] += "Q"
                continue
            if c == "`":
                self.i += 1
                self.words(closer="`")
                st["word"] += "$S"
                continue
            if c == "$":
                nxt = s[self.i + 1:self.i + 3]
                if nxt.startswith("(("):
                    self.arith()
                    st["word"] += "$A"
                elif nxt.startswith("("):
                    self.i += 2
                    self.words(closer=")")
                    st["word"] += "$S"
                elif nxt.startswith("{"):
                    self.i += 2
                    self.words(closer="}")
                    st["word"] += "$V"
                else:
                    st["word"] += c
                    self.i += 1
                continue
            if s.startswith("<<", self.i) and not s.startswith("<<<", self.i):
                m = HEREDOC_RE.match(s, self.i)
                if m:
                    finish(False)
                    self.pending.append((m.group(1) == "-", m.group(3)))
                    self.i = m.end()
                    continue
            if c in " \t":
                finish(False)
                self.i += 1
                continue
            if c == "\n":
                finish(True)
                self.i += 1
                self.skip_heredocs()
                continue
            if c in ";&|":
                finish(True)
                if s.startswith(";;", self.i):
                    st["pat"] = st["case"] > 0
                    self.i += 2
                    continue
                self.i += 1
                continue
            if c == "(":
                if NAME_RE.match(st["word"]) and s.startswith("()", self.i):
                    st["word"] = ""  # a function definition: name() { ... }
                    self.i += 2
                    st["cmd"] = True
                    continue
                finish(True)
                st["depth"] += 1
                self.i += 1
                continue
            if c == ")":
                if st["pat"]:
                    st["word"], st["quoted"], st["pat"] = "", False, False
                    st["cmd"] = True
                else:
                    finish(True)
                    st["depth"] = max(0, st["depth"] - 1)
                self.i += 1
                continue
            if c in "<>":
                # A redirection (2>&1, >file, < in): its target is no command.
                if st["word"].isdigit():
                    st["word"] = ""
                else:
                    finish(False)
                while self.i < len(s) and s[self.i] in "<>&":
                    self.i += 1
                while self.i < len(s) and s[self.i] in " \t":
                    self.i += 1
                if s[self.i:self.i + 1].isdigit() or s[self.i:self.i + 1] == "-":
                    self.i += 1  # >&2, <&-
                else:
                    st["redir"] = True
                continue
            st["word"] += c
            self.i += 1
        finish(True)

    def classify(self, w, quoted, st):
        if st["redir"]:
            st["redir"] = False
            return  # a redirection's target; command position unchanged
        if st["pat"]:
            if w == "esac":
                st["pat"] = False
                st["case"] -= 1
                st["cmd"] = False
            return
        if st["for"]:
            return
        if st["case_word"]:
            if w == "in":
                st["case_word"] = False
                st["pat"] = True
            return
        if not st["cmd"]:
            return
        p = st["prefix"]
        if p:
            if st["optarg"]:
                st["optarg"] = False
                return
            if w.startswith("-"):
                if p == "command" and w in ("-v", "-V"):
                    st["prefix"] = None
                    st["cmd"] = False
                    return
                st["optarg"] = w in PREFIX_OPTARG.get(p, ())
                return
            if p == "env" and ASSIGN_RE.match(w):
                return
            if st["prefix_left"] > 0:
                st["prefix_left"] -= 1
                return
            st["prefix"] = None
        if ASSIGN_RE.match(w):
            return  # VAR=value: the command, if any, comes next
        if w == "case":
            st["case"] += 1
            st["case_word"] = True
            return
        if w == "for":
            st["for"] = True
            return
        if w in OPENERS or w in ("done", "fi", "esac", "}"):
            st["cmd"] = w in OPENERS
            if w == "esac":
                st["case"] -= 1
            return
        self.calls.append(w)
        st["cmd"] = False
        if w in PREFIX:
            st["prefix"] = w
            st["prefix_left"] = PREFIX[w]
            st["cmd"] = True

    def dquote(self):
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c == "\\":
                self.i += 2
                continue
            if c == '"':
                self.i += 1
                return
            if c == "`":
                self.i += 1
                self.words(closer="`")
                continue
            if c == "$" and s.startswith("$((", self.i):
                self.arith()
                continue
            if c == "$" and s.startswith("$(", self.i):
                self.i += 2
                self.words(closer=")")
                continue
            if c == "$" and s.startswith("${", self.i):
                self.i += 2
                self.words(closer="}")
                continue
            self.i += 1

    def arith(self):
        depth = 0
        self.i += 1
        while self.i < len(self.s):
            c = self.s[self.i]
            self.i += 1
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    return


def shell_commands(text):
    lx = Lexer(text)
    lx.words()
    cmds = list(lx.calls)
    for body in lx.heredocs:
        cmds += python_commands(body)
    return cmds


def python_commands(text):
    out = []
    for r in PY_RES:
        out += r.findall(text)
    return out


def make_commands(text):
    """Recipe lines of a Makefile, read as shell after make's own syntax
    ($(VAR), $$, @, -) is taken away."""
    text = text.replace("\\\n", " ")
    cmds = []
    for line in text.split("\n"):
        if not line.startswith("\t"):
            continue
        # $$(Q) inside a define block is make's $(Q) once expanded.
        line = re.sub(r"\$\$\(([A-Z_]+)\)", "MAKEVAR", line)
        line = line.replace("$$", "\x00")
        prev = None
        while prev != line:
            prev = line
            line = re.sub(r"\$\([^()]*\)|\$\{[^{}]*\}|\$[@<^*?]", "MAKEVAR", line)
        line = line.replace("\x00", "$").strip()
        line = re.sub(r"^([@+-]|MAKEVAR)+", "", line).strip()
        cmds += [c for c in shell_commands(line) if "MAKEVAR" not in c]
    return cmds


def sourced_files(path, text, root):
    """The project files text sources, by a path that ends in a file under
    root ("$top/t/lib/stack.sh": the longest tail that names a file)."""
    found = []
    for tail in SOURCE_RE.findall(text):
        parts = tail.split("/")
        cands = [os.path.join(base, *parts[k:]) for k in range(len(parts))
                 for base in (root, os.path.dirname(path))]
        hit = next((c for c in cands if os.path.isfile(c)), None)
        if hit:
            found.append(hit)
    return found


def read_text(path):
    try:
        return open(path, encoding="utf-8", errors="replace").read()
    except OSError:
        return ""


def functions_of(path, root, seen=None):
    """Functions defined in path and in the files it sources."""
    seen = seen if seen is not None else set()
    if path in seen:
        return set()
    seen.add(path)
    text = read_text(path)
    names = {m[0] for m in FUNC_RE.findall(text)}
    for found in sourced_files(path, text, root):
        names |= functions_of(found, root, seen)
    return names


def sourcers_functions(files, root):
    """For each sourced library, the functions of the scripts that source it:
    a helper such as t/lib/sdk-relay.sh calls the sourcing script's ok."""
    lent = {}
    for f in files:
        if f.endswith(".sh"):
            for lib in sourced_files(f, read_text(f), root):
                lent.setdefault(lib, set()).update(functions_of(f, root))
    return lent


def package_files(pkg):
    """dpkg -L pkg, read from dpkg's own file lists when they are there (one
    dpkg call per package costs seconds over the Essential set)."""
    for lst in glob.glob("/var/lib/dpkg/info/%s.list" % pkg) + glob.glob("/var/lib/dpkg/info/%s:*.list" % pkg):
        try:
            return open(lst, encoding="utf-8", errors="replace").read().split("\n")
        except OSError:
            break
    r = subprocess.run(["dpkg", "-L", pkg], capture_output=True, text=True)
    return r.stdout.split("\n") if r.returncode == 0 else None


def essential_packages():
    r = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\t${Essential}\t${db:Status-Status}\n"],
                       capture_output=True, text=True, check=True)
    out = []
    for line in r.stdout.split("\n"):
        f = line.split("\t")
        if len(f) == 3 and f[1] == "yes" and f[2] == "installed":
            out.append(f[0])
    return out


def provided_commands(entries):
    """Command name -> the package that provides it."""
    prov = {}

    def add(pkg, files):
        for f in files:
            if f.startswith(BIN_DIRS) or re.match(r"^/usr/lib/[^/]+/bin/", f):
                prov.setdefault(os.path.basename(f), pkg)

    for pkg, probe in entries:
        # The probe file is what installing the package brings (make for
        # build-essential, python3 for python3) even when dpkg files it under
        # a dependency.
        add(pkg, [probe] + (package_files(pkg) or []))
    for pkg in essential_packages():
        add(pkg + " (essential)", package_files(pkg) or [])
    return prov


def own_programs(root):
    names = set()
    for pat in ("bin/*", "build/helpers/*", "build/bench/*", "t/fakes/*/*",
                "python/.venv/bin/*", "t/*.sh", "t/*/*.sh", "bench/*.sh"):
        names |= {os.path.basename(p) for p in glob.glob(os.path.join(root, pat))}
    # The venv's interpreter and pip are Debian's python3 (python3-venv).
    names = {n for n in names if not n.startswith(("python", "pip"))}
    names |= {"denv", "denv-cp", "denvd", "configure"}
    return names


def default_files(root):
    pats = ["t/*.sh", "t/*/*.sh", "t/*/*/*.sh", "t/*/*.py", "t/*/*/*.py",
            "bench/*.sh", "bench/lib/*.sh", "bench/lib/*.py", "python/tests/*.py",
            ".ci/run", "configure", "Makefile"]
    files = []
    for p in pats:
        files += sorted(glob.glob(os.path.join(root, p)))
    # The fixture image's entrypoint runs inside the image, not on the host.
    return [f for f in files if not f.endswith("t/fixtures/images/debian-entrypoint.sh")]


def commands_of(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    base = os.path.basename(path)
    if base == "Makefile":
        return make_commands(text)
    if path.endswith(".py") or text.startswith("#!/usr/bin/env python"):
        return python_commands(text)
    return shell_commands(text)


def resolves_to(cmd, prov):
    """An alternative (awk -> mawk) or a symlink under a bin directory."""
    path = cmd if cmd.startswith("/") else None
    if path is None:
        for d in os.environ.get("PATH", "").split(":") + ["/usr/sbin", "/sbin"]:
            p = os.path.join(d, cmd)
            if os.path.isfile(p) and os.access(p, os.X_OK):
                path = p
                break
    if path is None:
        return None
    real = os.path.realpath(path)
    return prov.get(os.path.basename(real))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=".")
    ap.add_argument("--packages", required=True, help="pkg:probe-file entries, space separated")
    ap.add_argument("--extra-packages", default="", help="more entries, as if deps.sh listed them")
    ap.add_argument("--list", action="store_true", help="print each command with its provider")
    ap.add_argument("--only", action="store_true", help="scan only the FILEs given")
    ap.add_argument("--program-cmds", default="", help="commands bin/denvd and bin/denv-cp run")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    entries = [tuple(e.split(":", 1)) for e in (a.packages + " " + a.extra_packages).split()]
    if any(len(e) != 2 for e in entries):
        ap.error("a package entry is not pkg:probe-file")
    prov = provided_commands(entries)
    own = own_programs(root)
    files = ([] if a.only else default_files(root)) + [os.path.abspath(f) for f in a.files]
    lent = sourcers_functions(files, root)
    bad = 0
    used = {}
    told = set()
    for name in a.program_cmds.split():
        if name not in prov:
            print("deps: bin/denvd calls %s, which no package in t/deps.sh provides" % name)
            bad = 1
    for f in files:
        funcs = functions_of(f, root) | lent.get(f, set())
        rel = os.path.relpath(f, root) if f.startswith(root + "/") else f
        for c in commands_of(f):
            if not c or "$" in c or "Q" == c or c.startswith(("-", "Q")) or "*" in c:
                continue
            name = c
            if "/" in c:
                if not c.startswith(BIN_DIRS):
                    continue  # a path into the project, or a variable's
                name = os.path.basename(c)
            if not re.match(r"^[A-Za-z0-9_.+-]+$", name):
                continue
            if name in BUILTINS or name in funcs or name in own:
                continue
            who = prov.get(name) or resolves_to(c, prov)
            if who is None:
                if (rel, name) in told:
                    continue
                told.add((rel, name))
                print("deps: %s calls %s, which no package in t/deps.sh provides" % (rel, name))
                bad = 1
                continue
            used.setdefault(name, (who, rel))
    if a.list:
        for name in sorted(used):
            print("%-16s %-28s (first in %s)" % (name, used[name][0], used[name][1]))
    return bad


if __name__ == "__main__":
    sys.exit(main())
