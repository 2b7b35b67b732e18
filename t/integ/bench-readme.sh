#!/bin/sh
# bench-readme.sh: bench/lib/readme.py rewrites README's performance
# paragraph from a saved `make bench` run (BENCH_SAVE): medians, ratios,
# met and missed targets and pending rows come from the run, the rest of
# the file is left as it was, and a README without the paragraph is refused.
set -u
top=${DENV_TOP:-$PWD}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/denv-t-bench-readme.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
n=0
ok() { n=$((n + 1)); if eval "$2"; then echo "ok $n - $1"; else echo "not ok $n - $1"; fi; }
echo "1..7"

t=$(printf '\t')
cat >"$tmp/raw" <<EOF
@fig${t}a${t}exec round trip${t}docker exec${t}ms${t}ratio<=0.5
@s${t}a${t}30
@s${t}a${t}10
@s${t}a${t}20
@b${t}a${t}50
@b${t}a${t}50
@fig${t}c${t}store replay${t}-${t}ms${t}<3000
@s${t}c${t}4000
@fig${t}d${t}warm pool claim${t}-${t}ms${t}<100
@pending${t}d${t}not built
@fig${t}e${t}compaction${t}-${t}ms${t}report
@s${t}e${t}306
@note${t}ignored
EOF
printf 'Title\n\nbefore\n\nMeasured here (`make bench`, old\nold figures; `make bench` prints the table.\n\nafter\n' >"$tmp/README"
python3 "$top/bench/lib/readme.py" "$tmp/raw" "$tmp/README"
rc=$?
ok "it rewrites the paragraph" '[ $rc = 0 ] && ! grep -q "old figures" "$tmp/README"'
flat=$(tr '\n' ' ' <"$tmp/README")
ok "median and ratio of a figure (20.0 ms, 0.40x)" 'case $flat in *"exec round trip 20.0 ms (0.40x docker exec; target <=0.5x)"*) true ;; *) false ;; esac'
ok "an absolute target missed is named" 'case $flat in *"1 of 2 targets met (missed: store replay)"*) true ;; *) false ;; esac'
ok "a pending row is named as not measured" 'case $flat in *"not measured in this run: warm pool claim"*) true ;; *) false ;; esac'
ok "a reported figure is given" 'case $flat in *"compaction 306 ms"*) true ;; *) false ;; esac'
ok "the rest of the file is as it was" '[ "$(head -n 4 "$tmp/README")" = "$(printf "Title\n\nbefore\n")" ] && [ "$(tail -n 2 "$tmp/README")" = "$(printf "\nafter")" ]'
printf 'no paragraph here\n' >"$tmp/R2"
python3 "$top/bench/lib/readme.py" "$tmp/raw" "$tmp/R2" 2>/dev/null
rc=$?
ok "a README without the paragraph is refused" '[ $rc = 1 ] && [ "$(cat "$tmp/R2")" = "no paragraph here" ]'
