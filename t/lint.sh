#!/bin/sh
# lint.sh: refuse the C calls STYLE.md bans (after curl's checksrc).
set -u
bad=$(grep -nE '\b(sprintf|vsprintf|strcpy|strcat|strtok|atoi|atol|gets|system|popen)[[:space:]]*\(' \
	src/*/*.c src/*/*.h t/*.c t/unit/*.c t/helpers/*.c fuzz/*.c bench/*.c 2>/dev/null |
	grep -vE '(snprintf|vsnprintf)\(' |
	grep -vE '^[^:]*:[0-9]+:[[:space:]]*(/?\*|//)' )
if [ -n "$bad" ]; then
	echo "$bad"
	echo "lint: banned calls above (use snprintf, buf_*, str_to_*, proc_*)"
	exit 1
fi
echo "lint: clean"
