#!/bin/sh
# tui-top.sh: `denv top` against a real bin/denv-cp with the scripted sidecar
# (t/cp/sidecar.py through t/tui/sidecar_run.py), inside tmux: a deploy
# followed on screen until its phases show ok, at 100x30 (colour,
# TERM=xterm-256color) and 80x24 (NO_COLOR), keys, resize, polling, quit and
# signals giving the terminal back; and the --once plain-text frame.
set -u
top=${DENV_TOP:-$PWD}
. "$top/t/cli/lib.sh"
if [ ! -x "$top/bin/denv" ] || [ ! -x "$top/bin/denv-cp" ]; then
	echo "1..0 # SKIP bin/denv or bin/denv-cp is not built"
	exit 0
fi
if ! command -v tmux >/dev/null 2>&1; then
	echo "1..0 # SKIP tmux is not installed (t/deps.sh installs it)"
	exit 0
fi
if ! "$PY" -c 'import websockets' 2>/dev/null; then
	echo "1..0 # SKIP python with websockets is not set up (python/.venv)"
	exit 0
fi
KEY=dak_tui_integration_key_0123456789
start_cp DENV_BOOTSTRAP_KEY=$KEY || { echo "1..0 # SKIP denv-cp did not start"; exit 0; }
export DENV_SERVER=$server DENV_API_KEY=$KEY
cppid=${pids## }
cppid=${cppid%% *}

# Our own tmux server on a socket in the temp dir: never the user's.
sock="$tmp/tmux.sock"
tm() { tmux -S "$sock" "$@"; }
trap 'tm kill-server 2>/dev/null; cleanup' EXIT

# ---- the scripted sidecar: every env.create takes 2 s, so phases can be seen running ----
"$PY" "$top/t/tui/sidecar_run.py" "${server##*:}" "$KEY" "$tmp/sc.ready" 2 2>"$tmp/sc.log" &
pids="$pids $!"
i=0
while [ $i -lt 100 ] && [ ! -s "$tmp/sc.ready" ]; do sleep 0.1; i=$((i + 1)); done
[ -s "$tmp/sc.ready" ]
ok $? "the scripted sidecar joined"

# ---- --once before any deployment ----
run top --once
is_rc 0 "top --once"
out_has "> box-1         yes  connected   dir" "--once: the host row (name, connected, status, storage)"
out_has "(no deployments yet)" "--once: the empty deployments pane says so"
grep -q "$server" "$tmp/out"
ok $? "--once: the title names the server"
run top --once --width 5
is_rc 2 "--width out of range is a usage error"
DENV_SERVER=http://127.0.0.1:1 run top --once
is_rc 1 "--once with no control plane fails"
err_has "denv: GET /v1/" "... saying which read failed"
run top </dev/null
is_rc 1 "interactive top without a terminal fails"
err_has "needs a terminal" "... and points at --once"

# ---- helpers for the screen ----
# session NAME W H [VAR=VALUE...]: a shell in a detached tmux window of W x H.
session() {
	name=$1 w=$2 h=$3
	shift 3
	tm -f /dev/null new-session -d -s "$name" -x "$w" -y "$h" \
		env HOME="$HOME" XDG_CONFIG_HOME="$XDG_CONFIG_HOME" DENV_SERVER="$server" DENV_API_KEY="$KEY" \
		PS1='PROMPT$ ' "$@" sh
	wait_screen "$name" '^PROMPT\$' 5
}
# screen NAME [-e]: the visible pane into $tmp/screen.
screen() { tm capture-pane -p $2 -t "$1" >"$tmp/screen" 2>/dev/null; }
# wait_screen NAME ERE SECONDS: until a screen line matches (0) or time runs out (1).
wait_screen() {
	j=0
	while [ $j -lt $(($3 * 10)) ]; do
		screen "$1" ""
		grep -qE -- "$2" "$tmp/screen" && return 0
		sleep 0.1
		j=$((j + 1))
	done
	return 1
}
# gone NAME ERE SECONDS: until no line matches.
gone() {
	j=0
	while [ $j -lt $(($3 * 10)) ]; do
		screen "$1" ""
		grep -qE -- "$2" "$tmp/screen" || return 0
		sleep 0.1
		j=$((j + 1))
	done
	return 1
}
keys() { tm send-keys -t "$@"; }
# The denv process in a session (child of the pane's shell).
top_pid() { pgrep -P "$(tm display -p -t "$1" '#{pane_pid}')" | head -n 1; }
deploy() {
	"$DENV" deploy --project hub -f "$tmp/compose.yaml" --wait=false >"$tmp/dep.json" 2>>"$tmp/err"
}
show() { sed 's/^/#   | /' "$tmp/screen"; }
# oks STATUS NAME: ok, and the screen on failure.
oks() {
	st=$1
	ok "$@"
	[ "$st" -eq 0 ] || show
}

cat >"$tmp/compose.yaml" <<'EOF'
services:
  app:
    image: busybox:1.36
    command: ["sleep", "infinity"]
    volumes: ["data:/data"]
volumes: { data: {} }
EOF
"$DENV" project create hub >/dev/null 2>>"$tmp/err"
ok $? "project hub created"

# ---- 100x30, colour: follow a deploy until every phase is settled ----
session big 100 30 TERM=xterm-256color
ok $? "tmux shell at 100x30"
keys big "stty -g >$tmp/stty.before; $DENV top 2>$tmp/top.err; stty -g >$tmp/stty.after" Enter
wait_screen big 'HOST +CONN +STATUS' 5
oks $? "the console starts: host pane header"
wait_screen big 'follow  live  \? help$' 5
ok $? "the title bar says live (the event stream is up) and follow"
deploy
ok $? "a deploy was started through the API"
DEP=$(sed -n 's/.*"ID": "\(dep_[0-9A-Z]*\)".*/\1/p' "$tmp/dep.json" | head -n 1)
SHORT=dep_$(printf %s "$DEP" | tail -c 6)
SHORT1=$SHORT DEP1=$DEP
wait_screen big "^  5  prepare +running +- +>+" 10
oks $? "the prepare phase is shown running, with a growing bar"
wait_screen big "^> $SHORT +hub/alpha +deploy +running" 5 || grep -q "^> $SHORT" "$tmp/screen"
oks $? "the new deployment is selected (follow)"
wait_screen big "^  11 verdict +ok " 20
oks $? "the phases reach ok: verdict ok"
for ph in "1  resolve   ok" "2  place     ok" "3  provision skipped" "5  prepare   ok      2\.[0-9]s +=+" \
	"9  snapshot  ok" "11 verdict   ok"; do
	grep -qE "^[> ] $ph" "$tmp/screen"
	oks $? "phase row: $ph"
done
grep -qE "^> $SHORT +hub/alpha +deploy +succeeded +[0-9]+s +2\.[0-9]s" "$tmp/screen"
oks $? "the deployment row: succeeded, age, took"
grep -qE "^> hub +alpha +running +ver_[0-9A-Z]{6} +- +app=127\.0\.0\.1:20000" "$tmp/screen"
oks $? "the environment row: status, version, parent, endpoints"
grep -qE "^> box-1 +yes +connected +dir .* hub/alpha$" "$tmp/screen"
oks $? "the host row lists the environment on it"
screen big -e
grep -q "$(printf '\033')\[32m" "$tmp/screen"
ok $? "colour: ok statuses are green on a colour terminal"

# Keys: Tab to the phases, Enter shows the evidence, Esc closes, ? helps, / filters.
keys big Tab Enter
wait_screen big "^ PHASE resolve of $SHORT" 5
oks $? "Tab + Enter: the phase's detail"
grep -q '^  "services": \[$' "$tmp/screen"
oks $? "the evidence is pretty-printed"
keys big Escape
wait_screen big '^  #  PHASE' 5
ok $? "Esc closes the detail"
keys big '?'
wait_screen big '^ HELP' 5
ok $? "? shows the help"
keys big Escape
wait_screen big '^  #  PHASE' 5
keys big / v e r d Enter
gone big '^  1  resolve' 5
oks $? "/ filters the focused pane (resolve gone)"
grep -qE '^> 11 verdict +ok' "$tmp/screen" && grep -q " 1/11 /verd $SHORT\$" "$tmp/screen"
oks $? "only verdict left, and the header says 1/11 /verd"
keys big / Escape
wait_screen big '^. 1  resolve' 5
ok $? "Esc in the filter prompt clears it"

# Resize to 80x24 and back: the layout follows.
tm resize-window -t big -x 80 -y 24
wait_screen big '^.{60,80}\? help $' 5 || wait_screen big '\? help$' 1
screen big ""
[ "$(awk 'length > 80' "$tmp/screen" | wc -l)" -eq 0 ] && [ "$(wc -l <"$tmp/screen")" -le 24 ]
oks $? "after a resize to 80x24: no line over 80 columns"
grep -qE '^ denv top .*\? help$' "$tmp/screen" && grep -qE '^  #  PHASE +STATUS +TOOK +TIMELINE' "$tmp/screen"
oks $? "... and the title and phases are laid out again"
tm resize-window -t big -x 100 -y 30
wait_screen big '^  HOST.{80,}' 5
ok $? "back to 100 columns"

# q quits and gives the terminal back.
keys big q
wait_screen big '^PROMPT\$ ?$' 5
oks $? "q quits: the shell prompt is back"
gone big '^ denv top ' 2
oks $? "no curses residue left on the screen"
sleep 0.3
cmp -s "$tmp/stty.before" "$tmp/stty.after"
ok $? "the terminal's modes are restored (stty -g before = after)"
[ -f "$tmp/top.err" ] && [ ! -s "$tmp/top.err" ]
ok $? "nothing on stderr (and no sanitizer report when DENV_CLI_BIN is an ASan build)"

# ---- 80x24, NO_COLOR: no garbage, every line within 80 columns ----
session small 80 24 TERM=xterm-256color NO_COLOR=1
keys small "$DENV top" Enter
wait_screen small 'HOST +CONN' 5
deploy
DEP=$(sed -n 's/.*"ID": "\(dep_[0-9A-Z]*\)".*/\1/p' "$tmp/dep.json" | head -n 1)
SHORT=dep_$(printf %s "$DEP" | tail -c 6)
wait_screen small "^> $SHORT .* succeeded" 20 && wait_screen small "^  11 verdict +ok" 5
oks $? "80x24: the second deploy followed to ok"
[ "$(awk 'length > 80' "$tmp/screen" | wc -l)" -eq 0 ]
oks $? "80x24: no line longer than 80 columns"
! LC_ALL=C grep -q '[^ -~]' "$tmp/screen"
oks $? "80x24: printable ASCII only (no garbage bytes)"
[ "$(wc -l <"$tmp/screen")" -eq 24 ] && head -n 1 "$tmp/screen" | grep -q '^ denv top ' &&
	tail -n 1 "$tmp/screen" | grep -q '^Tab pane'
oks $? "80x24: title on the first line, key help on the last"
grep -qE '^  HOST|^  PROJECT|^  DEPLOYMENT|^  #  PHASE' "$tmp/screen" &&
	[ "$(grep -cE '^  (HOST|PROJECT|DEPLOYMENT|#  PHASE) ' "$tmp/screen")" -eq 4 ]
oks $? "80x24: all four panes are on screen"
screen small -e
! grep -qE "$(printf '\033')\[(3[0-7]|4[0-7]|38;|48;)" "$tmp/screen"
ok $? "NO_COLOR: no colour escapes (reverse and bold only)"
grep -q "$(printf '\033')\[7m\|$(printf '\033')\[[0-9;]*7m" "$tmp/screen"
ok $? "NO_COLOR: the title and cursor still stand out (reverse video)"
pid=$(top_pid small)
kill -TERM "$pid" 2>/dev/null
wait_screen small '^PROMPT\$ ?$' 5 && gone small '^ denv top ' 2
oks $? "SIGTERM: clean exit, prompt back, no residue"

# ---- polling when the stream is off; a fatal signal still restores the terminal ----
session poll 80 24 TERM=xterm-256color DENV_NO_STREAM=1
keys poll "$DENV top" Enter
wait_screen poll 'follow  polling  \? help$' 5
oks $? "without the stream the title says polling"
wait_screen poll "^  11 verdict +ok" 5
oks $? "polling still shows the phases"
keys poll C-c
wait_screen poll '^PROMPT\$ ?$' 5 && gone poll '^ denv top ' 2
oks $? "Ctrl-C quits cleanly"
keys poll clear Enter
keys poll "stty -g >$tmp/stty.before2; $DENV top; stty -g >$tmp/stty.after2" Enter
wait_screen poll 'follow  polling  \? help$' 5
pid=$(top_pid poll)
kill -SEGV "$pid" 2>/dev/null
wait_screen poll 'denv top: fatal signal; terminal restored' 5
oks $? "SIGSEGV: the handler restores the terminal and says so"
wait_screen poll '^PROMPT\$ ?$' 5 && gone poll '^ denv top ' 2
oks $? "... the prompt is back with no curses residue"
sleep 0.3
cmp -s "$tmp/stty.before2" "$tmp/stty.after2"
ok $? "... and the terminal's modes are restored"

# ---- help and the man page ----
run top --help
is_rc 0 "denv top --help"
out_has "usage: denv top [flags]" "top --help prints its usage"
out_has "--once" "... with its flags"
run --help
out_has "  top " "denv --help lists top"
if command -v groff >/dev/null 2>&1; then
	groff -ww -z -man "$top/man/denv-top.1" >"$tmp/out" 2>"$tmp/err"
	[ $? -eq 0 ] && [ ! -s "$tmp/err" ]
	ok $? "man/denv-top.1: no groff warnings"
fi

# ---- --once after the deploys: deterministic columns ----
run top --once
is_rc 0 "top --once after deploys"
out_has "  HOST          CONN STATUS      STORE CPU MEM    DISK  SEEN  ENVIRONMENTS" "--once: hosts columns"
out_has "  PROJECT     ENV           STATUS    VERSION    PARENT     ENDPOINTS" "--once: environments columns"
out_has "  DEPLOYMENT ENVIRONMENT         KIND     STATUS      AGE   TOOK   ERROR" "--once: deployments columns"
out_has "  #  PHASE     STATUS  TOOK   TIMELINE                            EVIDENCE" "--once: phases columns"
[ "$(grep -cE '^. dep_[0-9A-Z]{6} +hub/alpha +deploy +succeeded ' "$tmp/out")" -eq 2 ]
ok $? "--once: both deployments, succeeded"
grep -qE "^> $SHORT " "$tmp/out"
ok $? "--once: the newest deployment is the selected one"
[ "$(grep -cE '^.  ?[0-9]+ +[a-z]+ +(ok|skipped) ' "$tmp/out")" -eq 11 ]
ok $? "--once: eleven phases, each ok or skipped"
[ "$(awk 'length > 100' "$tmp/out" | wc -l)" -eq 0 ] && ! LC_ALL=C grep -q '[^ -~]' "$tmp/out"
ok $? "--once: plain text within 100 columns"
run top --once --width 140
grep -qE '^  7  health    ok      [0-9]+ms +=? +\{"endpoints":\{"app":"127\.0\.0\.1:20000"\}\}$' "$tmp/out"
ok $? "--once --width 140: a phase row carries its evidence"
run top --once --width 80
[ "$(awk 'length > 80' "$tmp/out" | wc -l)" -eq 0 ]
ok $? "--once --width 80: within 80 columns"
# A deploy that fails: the sidecar refuses images named bad*.
sed 's|busybox:1.36|bad/image:1|' "$tmp/compose.yaml" >"$tmp/bad.yaml"
"$DENV" deploy --project hub -f "$tmp/bad.yaml" >/dev/null 2>&1
run top --once --width 120
grep -qE '^> dep_[0-9A-Z]{6} +hub/alpha +deploy +rolled_back +[0-9]+s +[0-9.]+m?s +prepare: .*pull access denied' "$tmp/out"
ok $? "--once: a rolled-back deployment with its error"
grep -qE '^  5  prepare   failed  [0-9.]+m?s +X+ +.*pull access denied' "$tmp/out" &&
	grep -qE '^  6  start     skipped -$' "$tmp/out"
ok $? "--once: the failed phase (X bar, error) and the skipped ones after it"
run top --once --deployment "$DEP1"
grep -qE "^> $SHORT1 " "$tmp/out" && grep -qE "^  11 verdict   ok" "$tmp/out"
ok $? "--deployment shows the named (older) deployment's phases"
# ---- the stream goes away: polling with the error shown, then live again ----
session drop 80 24 TERM=xterm-256color
keys drop "$DENV top" Enter
wait_screen drop 'follow  live  \? help$' 5
oks $? "live before the control plane stops"
kill -TERM "$cppid"
wait_screen drop 'follow  polling  \? help$' 5
oks $? "the stream closed: the title says polling"
wait_screen drop '^GET /v1/.*Connection refused' 5
oks $? "the failed read is on the bottom line"
grep -q '^  11 verdict' "$tmp/screen"
oks $? "the last good picture stays on screen"
"$top/bin/denv-cp" -addr "127.0.0.1:${server##*:}" -db "$tmp/store" 2>"$tmp/cp2.log" &
pids="$pids $!"
wait_screen drop '^Tab pane' 10
oks $? "the control plane is back: the error is gone"
wait_screen drop 'follow  live  \? help$' 25
oks $? "the stream is dialled again: live"
keys drop q
wait_screen drop '^PROMPT\$ ?$' 5
oks $? "q quits"
done_testing
