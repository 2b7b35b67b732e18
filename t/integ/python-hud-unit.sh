#!/bin/sh
# python-hud-unit.sh: denv.hud's unit tests (python/tests/test_hud.py) under
# python/.venv-hud, the Python 3.11/3.12 venv with HUD 0.6 that t/deps.sh
# makes (HUD cannot share Harbor's venv; t/requirements-hud.txt says why).
set -u
top=${DENV_TOP:-$PWD}
py="$top/python/.venv-hud/bin/python"
if [ ! -x "$py" ] || ! "$py" -c 'import hud' >/dev/null 2>&1; then
	echo "1..0 # SKIP python/.venv-hud with hud is missing (t/deps.sh makes it)"
	exit 0
fi
cd "$top/python/tests" || exit 1
PYTHONPATH="$top/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH
exec "$py" tap.py test_hud
