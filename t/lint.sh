#!/bin/sh
# lint.sh: refuse the C calls STYLE.md bans (after curl's checksrc),
# functions of the programs longer than FUNC_LINES_MAX, and new call circles.
set -u
status=0
bad=$(grep -nE '\b(sprintf|vsprintf|strcpy|strcat|strtok|atoi|atol|gets|system|popen)[[:space:]]*\(' \
	src/*/*.c src/*/*.h src/*/*/*.c src/*/*/*.h t/*.c t/unit/*.c t/helpers/*.c fuzz/*.c bench/*.c 2>/dev/null |
	grep -vE '(snprintf|vsnprintf)\(' |
	grep -vE '^[^:]*:[0-9]+:[[:space:]]*(/?\*|//)' )
if [ -n "$bad" ]; then
	echo "$bad"
	echo "lint: banned calls above (use snprintf, buf_*, str_to_*, proc_*)"
	status=1
fi

# A function of the control plane, denvd or the CLI fits on a screen or two:
# from its opening brace to its closing one (both in column 0, the house
# layout) at most this many lines. Parsers' state machines live in the
# library (src/json, src/http, ...), which this does not count.
FUNC_LINES_MAX=100
long=$(awk -v max=$FUNC_LINES_MAX '
	FNR == 1 { start = 0 }
	/^\{/ { start = FNR }
	/^\}/ && start { n = FNR - start + 1; if (n > max) printf "%s:%d: a function body of %d lines\n", FILENAME, start, n; start = 0 }
' src/cp/*.c src/sidecar/*.c src/sidecar/*/*.c src/cli/*.c 2>/dev/null)
if [ -n "$long" ]; then
	echo "$long"
	echo "lint: functions above are longer than $FUNC_LINES_MAX lines (split them into named steps)"
	status=1
fi

# Layering runs one way: no files of the sidecar or the TUI call one another
# in a circle (t/call-circles.py; the one still being undone is listed there).
if ! python3 t/call-circles.py src/sidecar src/tui; then
	echo "lint: the call circles above are new (move the shared part into a file both call)"
	status=1
fi
[ $status -eq 0 ] && echo "lint: clean"
exit $status
