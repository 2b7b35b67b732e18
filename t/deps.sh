#!/bin/sh
# deps.sh: install what `make check`, `make demo`, `make bench` and
# `make e2e-frameworks` need, so that a fresh clone on a Debian machine (as
# root) needs no other set-up. Debian packages through apt-get, Python
# packages into python/.venv through pip.
set -u

#   sh t/deps.sh [bench]       bench: also what `make bench` drives (wrk, nginx)
#   sh t/deps.sh --verify [--list] [--only] [--extra-packages "PKG:FILE..."] [FILE...]
#       check that every command the scripts call (t/, bench/, .ci/run,
#       configure, the Makefile's recipes, and any FILE) is a builtin, the
#       project's own, or comes from a package listed here or an Essential
#       one (t/deps-verify.py); names each script and command that is not.
#
# Debian package : a file or command that shows it is installed (and that
# --verify counts as provided by it).
pkgs="
build-essential:/usr/bin/make
pkgconf:/usr/bin/pkg-config
libssl-dev:/usr/include/openssl/ssl.h
zlib1g-dev:/usr/include/zlib.h
libpq-dev:/usr/include/postgresql/libpq-fe.h
postgresql:/usr/lib/postgresql/15/bin/initdb
postgresql-client:/usr/bin/psql
libncurses-dev:/usr/include/curses.h
clang:/usr/bin/clang
libclang-rt-14-dev:/usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a
perl:/usr/bin/prove
curl:/usr/bin/curl
openssl:/usr/bin/openssl
python3:/usr/bin/python3
python3-venv:/usr/share/doc/python3-venv/copyright
apt:/usr/bin/apt-get
mawk:/usr/bin/awk
mount:/bin/mount
procps:/usr/bin/pgrep
tar:/bin/tar
docker.io:/usr/sbin/dockerd
iptables:/usr/sbin/iptables
btrfs-progs:/sbin/mkfs.btrfs
e2fsprogs:/sbin/mkfs.ext4
busybox-static:/bin/busybox
debootstrap:/usr/sbin/debootstrap
iproute2:/sbin/ip
groff-base:/usr/bin/groff
tmux:/usr/bin/tmux
jq:/usr/bin/jq
chromium:/usr/bin/chromium
libfaketime:/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1
runsc:/usr/bin/runsc
"
bench_pkgs="wrk:/usr/bin/wrk nginx:/usr/sbin/nginx"
# What the programs themselves run (denvd: docker, iptables for the host
# wall, btrfs for snapshots): --verify checks these as bin/denvd's calls.
prog_cmds="docker iptables btrfs"

if [ "${1:-}" = --verify ]; then
	shift
	exec python3 "$(dirname "$0")/deps-verify.py" --root "$(cd "$(dirname "$0")/.." && pwd)" \
		--packages "$pkgs $bench_pkgs" --program-cmds "$prog_cmds" "$@"
fi
if [ "${1:-}" = bench ]; then
	pkgs="$pkgs $bench_pkgs"
fi

missing=
for entry in $pkgs; do
	pkg=${entry%%:*}
	file=${entry#*:}
	[ -e "$file" ] || missing="$missing $pkg"
done

if [ -n "$missing" ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "deps: missing Debian packages:$missing (run make check as root, or apt-get install them)" >&2
		exit 1
	fi
	echo "deps: installing$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >/tmp/denv-apt.log 2>&1 || true
	# shellcheck disable=SC2086
	if ! apt-get install -y -q --no-install-recommends $missing >>/tmp/denv-apt.log 2>&1; then
		tail -n 20 /tmp/denv-apt.log >&2
		echo "deps: apt-get install failed (log: /tmp/denv-apt.log)" >&2
		exit 1
	fi
fi

# Python packages for the test suites (independent peers such as `websockets`,
# and the real Harbor, Inspect and OpenEnv). Harbor needs Python >= 3.12, so
# the venv uses the newest 3.12+ interpreter present (pyenv's included),
# falling back to Debian's python3.
venv=python/.venv
req=t/requirements.txt
req_nodeps=t/requirements-nodeps.txt
stamp=$venv/.req-stamp
pick_python() {
	for py in python3.13 python3.12 /root/.pyenv/versions/3.13*/bin/python3 \
		/root/.pyenv/versions/3.12*/bin/python3 /usr/bin/python3 python3; do
		p=$(command -v "$py" 2>/dev/null) || continue
		"$p" -c 'import venv, ensurepip' >/dev/null 2>&1 && { echo "$p"; return 0; }
	done
	return 1
}
py=$(pick_python) || { echo "deps: no python3 with venv (install Debian package python3-venv)" >&2; exit 1; }
if [ ! -x "$venv/bin/python" ] || ! cmp -s "$venv/.python" - <<PY
$py
PY
then
	echo "deps: creating $venv with $py"
	rm -rf "$venv"
	"$py" -m venv "$venv" || { echo "deps: cannot create $venv with $py" >&2; exit 1; }
	echo "$py" >"$venv/.python"
fi
# The stamp covers the requirements and the package's own pyproject.toml, so
# either changing reinstalls. The package is installed editable: Inspect finds
# its sandbox through the entry point, which needs the installed metadata.
want=$(cat "$req" "$req_nodeps" python/pyproject.toml 2>/dev/null)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
	echo "deps: pip install -r $req and python/ into $venv"
	{ "$venv/bin/pip" install -q --disable-pip-version-check -r "$req" &&
	  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -r "$req_nodeps" &&
	  { [ ! -f python/pyproject.toml ] ||
	    "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -e python; }; } \
		>/tmp/denv-pip.log 2>&1 || {
		tail -n 20 /tmp/denv-pip.log >&2
		echo "deps: pip install failed (log: /tmp/denv-pip.log)" >&2
		exit 1
	}
	printf '%s' "$want" >"$stamp"
fi

# HUD 0.6 needs Python 3.11 or 3.12 and pins fastmcp 3 and mcp < 2, which the
# venv above (Harbor's fastmcp 4) cannot hold: python/.venv-hud, its own, on
# Python 3.11: its site-packages go into the HUD test image, whose python3
# is Debian bookworm's 3.11, and compiled modules (pydantic_core) load only
# under the minor version they were built for. The stamp names the
# interpreter too, so a venv made on another one is made again.
hvenv=python/.venv-hud
hreq=t/requirements-hud.txt
hpy=
for p in python3.11 /root/.pyenv/versions/3.11*/bin/python3 /usr/bin/python3.11; do
	p=$(command -v "$p" 2>/dev/null) || continue
	"$p" -c 'import venv, ensurepip' >/dev/null 2>&1 && { hpy=$p; break; }
done
hstamp=$([ -n "$hpy" ] && "$hpy" -c 'import sys; print("python %d.%d" % sys.version_info[:2])'; cat "$hreq")
if [ -z "$hpy" ]; then
	echo "deps: no Python 3.11 for $hvenv: the HUD conformance check is skipped" >&2
elif [ ! -f "$hvenv/.req-stamp" ] || [ "$(cat "$hvenv/.req-stamp")" != "$hstamp" ]; then
	echo "deps: creating $hvenv with $hpy (pip install -r $hreq)"
	rm -rf "$hvenv"
	{ "$hpy" -m venv "$hvenv" &&
	  "$hvenv/bin/pip" install -q --disable-pip-version-check -r "$hreq"; } >/tmp/denv-pip-hud.log 2>&1 || {
		tail -n 20 /tmp/denv-pip-hud.log >&2
		echo "deps: pip install for $hvenv failed (log: /tmp/denv-pip-hud.log)" >&2
		exit 1
	}
	printf '%s\n' "$hstamp" >"$hvenv/.req-stamp"
fi
exit 0
