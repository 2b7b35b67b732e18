#!/bin/sh
# python-types.sh: `mypy --strict` over the Python package (python/denv), with
# the settings in python/pyproject.toml. One TAP test; a failure lists mypy's
# findings. mypy comes from t/requirements.txt.
set -u
top=${DENV_TOP:-$PWD}
py="$top/python/.venv/bin/python"
if [ ! -x "$py" ]; then
	echo "1..0 # SKIP python/.venv is missing (t/deps.sh makes it)"
	exit 0
fi
echo "1..1"
cd "$top/python" || exit 1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if "$py" -m mypy --no-incremental denv >"$out" 2>&1; then
	echo "ok 1 - mypy --strict: $(tail -n 1 "$out")"
else
	echo "not ok 1 - mypy --strict over python/denv"
	sed 's/^/#   /' "$out" | head -n 60
	exit 1
fi
