#!/bin/sh
# demo.sh: `make demo` from a fresh clone, as root: packages, configure, the
# programs, then the quickstart walk-through in t/demo-run.sh.
set -eu
cd "$(dirname "$0")/.."
sh t/deps.sh
[ -f config.mk ] || ./configure
make --no-print-directory -j2 all >/dev/null
for b in bin/denv-cp bin/denvd bin/denv; do
	[ -x "$b" ] || { echo "make demo: $b did not build" >&2; exit 1; }
done
exec sh t/demo-run.sh
