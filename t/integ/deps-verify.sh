#!/bin/sh
# deps-verify.sh: `t/deps.sh --verify` passes on the tree, and fails, naming
# the script and the command, when a script calls what no listed package
# provides; the lexer finds calls in every command position and does not
# take arguments, quoted text, here-documents or functions for calls.
set -u
top=${DENV_TOP:-$PWD}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/denv-deps.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
n=0
failed=0
ok() { # ok STATUS NAME
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else failed=$((failed + 1)); echo "not ok $n - $2"; fi
}
show() { sed 's/^/#   /' "$tmp/out" | head -n 30; }

verify() { sh "$top/t/deps.sh" --verify "$@" >"$tmp/out" 2>&1; rc=$?; }

if ! command -v dpkg >/dev/null 2>&1; then
	echo "1..0 # SKIP not a Debian system (no dpkg)"
	exit 0
fi

verify
[ $rc -eq 0 ]
ok $? "every command the scripts call comes from a listed package (exit $rc)"
[ $rc -eq 0 ] || show

verify --list
grep -q '^debootstrap  *debootstrap ' "$tmp/out" && grep -q '^iptables  *iptables ' "$tmp/out"
ok $? "--list attributes debootstrap and iptables to their packages"

# The regression this check exists for: without debootstrap in the list, the
# fixture image build (make demo, make check) is named.
pkgs=$(sed -n '/^pkgs="/,/^"/p' "$top/t/deps.sh" | grep : | grep -v '^debootstrap:' | tr '\n' ' ')
python3 "$top/t/deps-verify.py" --root "$top" --packages "$pkgs wrk:/usr/bin/wrk nginx:/usr/sbin/nginx" >"$tmp/out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q '^deps: t/fixtures/images/build.sh calls debootstrap,' "$tmp/out"
ok $? "a list without debootstrap fails, naming t/fixtures/images/build.sh (exit $rc)"

# A new call to xmllint (libxml2-utils, not listed) fails the check ...
printf '#!/bin/sh\nset -e\nxmllint --noout "$1"\n' >"$tmp/uses-xmllint.sh"
verify "$tmp/uses-xmllint.sh"
[ $rc -ne 0 ]
ok $? "a script calling xmllint fails --verify (exit $rc)"
grep -qF "$tmp/uses-xmllint.sh calls xmllint, which no package in t/deps.sh provides" "$tmp/out"
ok $? "... and the message names the script and the command"
[ $rc -ne 0 ] || show
# ... until its package is listed.
verify --extra-packages libxml2-utils:/usr/bin/xmllint "$tmp/uses-xmllint.sh"
[ $rc -eq 0 ]
ok $? "listing libxml2-utils makes it pass (exit $rc)"

# Every command position is read.
cat >"$tmp/positions.sh" <<'EOF'
#!/bin/sh
. "$top/t/lib/stack.sh"
nopkg-line -x
echo a | nopkg-pipe
true && nopkg-and
false || nopkg-or; nopkg-semi
x=$(nopkg-subst arg) y="$(nopkg-dq-subst)" z=`nopkg-backtick`
if nopkg-if; then nopkg-then; else nopkg-else; fi
while nopkg-while; do nopkg-do; done
for g in a do b
do nopkg-for-body; done
timeout 5 nopkg-timeout
xargs -n 1 nopkg-xargs </dev/null
env A=1 B=2 nopkg-env
VAR=1 nopkg-assign
( nopkg-subshell )
{ nopkg-group; }
! nopkg-not
exec nopkg-exec 2>&1
echo "${HOME:-$(nopkg-in-expansion)}"
case $1 in
a|b) nopkg-case-body ;;
esac
/usr/bin/nopkg-abs
EOF
verify --only "$tmp/positions.sh"
missing=
for c in line pipe and or semi subst dq-subst backtick if then else while do for-body timeout xargs env \
	assign subshell group not exec in-expansion case-body abs; do
	grep -q "calls nopkg-$c," "$tmp/out" || missing="$missing nopkg-$c"
done
[ -z "$missing" ]
ok $? "calls in every command position are found (missed:${missing:- none})"

# Arguments, quoted text, comments, here-documents and functions are not calls.
cat >"$tmp/not-calls.sh" <<'EOF'
#!/bin/sh
# nopkg-comment
. "$top/t/lib/stack.sh"
echo nopkg-arg
docker exec box nopkg-in-container
docker run img sh -c 'nopkg-quoted; nopkg-quoted2'
command -v nopkg-optional >/dev/null || echo skip
echo hi > nopkg-target
for f in nopkg-for-a do nopkg-for-b; do echo "$f"; done
case $1 in
nopkg-pattern) echo p ;;
*) echo q ;;
esac
cat <<EOT
nopkg-heredoc
EOT
nopkg_fn() { echo fn; }
nopkg_fn
stack_json 'd'
n=$((n + 1))
EOF
verify --only "$tmp/not-calls.sh"
[ $rc -eq 0 ]
ok $? "arguments, quotes, comments, here-documents, functions (own and sourced) are not calls (exit $rc)"
[ $rc -eq 0 ] || show

# A sourced helper may call its sourcer's functions (t/lib/sdk-relay.sh calls
# ok); what neither defines is still a call.
printf 'relay() { nopkg_tap 0 x; nopkg-in-lib; }\n' >"$tmp/helper.sh"
printf '#!/bin/sh\nnopkg_tap() { echo "ok - $2"; }\n. "$tmp/helper.sh"\nrelay\n' >"$tmp/sources.sh"
verify --only "$tmp/sources.sh" "$tmp/helper.sh"
[ $rc -ne 0 ] && grep -q 'helper.sh calls nopkg-in-lib,' "$tmp/out" && ! grep -q 'calls nopkg_tap,' "$tmp/out"
ok $? "a sourced helper may call its sourcer's function, not an unlisted command"
[ $rc -ne 0 ] || show

# Python: a literal program name in subprocess calls.
printf 'import subprocess\nsubprocess.run(["nopkg-python", "-x"])\nsubprocess.run(["docker", "ps"])\n' >"$tmp/t.py"
verify --only "$tmp/t.py"
[ $rc -ne 0 ] && grep -q 'calls nopkg-python,' "$tmp/out" && ! grep -q 'calls docker,' "$tmp/out"
ok $? "a Python test's subprocess call of an unlisted program fails, docker's does not"

# Makefile recipes, after make's own syntax is taken away.
mkdir -p "$tmp/mk"
printf 'all:\n\t@$(Q)$(CC) -o x x.c\n\t@nopkg-recipe --x $(FOO) $$HOME\n' >"$tmp/mk/Makefile"
verify --only "$tmp/mk/Makefile"
[ $rc -ne 0 ] && grep -q 'calls nopkg-recipe,' "$tmp/out" && ! grep -q 'calls CC,' "$tmp/out"
ok $? "a Makefile recipe's call is checked; make variables are not calls"

echo "1..$n"
[ "$failed" -eq 0 ]
