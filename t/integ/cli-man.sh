#!/bin/sh
# cli-man.sh: man/denv.1 and man/denv-compose.5 are clean under groff -ww,
# the compose example in denv-compose(5) is accepted by denv-cp, and the
# bash completion script loads and completes.
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/cli/lib.sh"

for page in man/denv.1 man/denv-compose.5; do
	if command -v groff >/dev/null 2>&1; then
		groff -ww -z -man "$top/$page" >"$tmp/out" 2>"$tmp/err"
		[ $? -eq 0 ] && [ ! -s "$tmp/err" ]
		ok $? "$page: no groff warnings"
	else
		n=$((n + 1))
		echo "ok $n # SKIP groff is not installed (Debian: groff-base)"
	fi
done

# The example, unescaped from the page's roff.
"$PY" - "$top/man/denv-compose.5" >"$tmp/example.yaml" <<'PYEOF'
import sys
text = open(sys.argv[1]).read()
block = text.split(".SH EXAMPLE\n.nf\n", 1)[1].split("\n.fi\n", 1)[0]
for a, b in (("\\(dq", '"'), ("\\(rs", "\\"), ("\\-", "-"), ("\\(aq", "'")):
    block = block.replace(a, b)
print(block)
PYEOF
grep -q "x-denv:" "$tmp/example.yaml"
ok $? "denv-compose(5) has an example"
if [ -x "$top/bin/denv-cp" ] && [ -x "$top/bin/denv" ] && start_cp DENV_BOOTSTRAP_KEY=dak_cli_man_key_0123456789; then
	export DENV_SERVER=$server DENV_API_KEY=dak_cli_man_key_0123456789
	run project create man
	run deploy --project man -f "$tmp/example.yaml" --wait=false
	is_rc 0 "the example deploys"
	jq_ok 'd["deployment"]["Params"]["spec"]["agent"]["service"] == "box"' "with its agent service"
else
	n=$((n + 1))
	echo "ok $n # SKIP bin/denv-cp or bin/denv missing"
fi

# Bash completion: commands, subcommands, flags.
comp=$top/contrib/bash-completion/denv
if command -v bash >/dev/null 2>&1; then
	got=$(bash -c '. "$1"; COMP_WORDS=(denv fo); COMP_CWORD=1; _denv; echo "${COMPREPLY[*]}"' _ "$comp" 2>&1)
	[ "$got" = fork ]
	ok $? "completes a command (got: $got)"
	got=$(bash -c '. "$1"; COMP_WORDS=(denv project ""); COMP_CWORD=2; _denv; echo "${COMPREPLY[*]}"' _ "$comp" 2>&1)
	[ "$got" = "create list envs" ]
	ok $? "completes subcommands (got: $got)"
	got=$(bash -c '. "$1"; COMP_WORDS=(denv fork x --); COMP_CWORD=3; _denv; echo "${COMPREPLY[*]}"' _ "$comp" 2>&1)
	[ "$got" = "--name --version --wait --wait=false --help" ]
	ok $? "completes a command's flags after an argument (got: $got)"
	got=$(bash -c '. "$1"; COMP_WORDS=(denv files get --s); COMP_CWORD=3; _denv; echo "${COMPREPLY[*]}"' _ "$comp" 2>&1)
	[ "$got" = "--service" ]
	ok $? "completes a subcommand's flags (got: $got)"
	got=$(bash -c '. "$1"; complete -p denv' _ "$comp" 2>&1)
	[ "$got" = "complete -F _denv denv" ]
	ok $? "registers for denv"
else
	n=$((n + 1))
	echo "ok $n # SKIP bash is not installed"
fi

done_testing
