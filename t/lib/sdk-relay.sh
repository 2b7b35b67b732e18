# sdk-relay.sh: sdk_relay OUT RC [ERR]: the TAP lines a provider SDK's check
# printed into OUT, each as one of ours (ok from the sourcing script), then
# one test that it exited 0 (RC) having printed something; ERR's tail on failure.
sdk_relay() {
	while read -r line; do
		case $line in
		"ok "*) ok 0 "PyGithub: ${line#* - }" ;;
		"not ok "*) ok 1 "PyGithub: ${line#* - }" ;;
		"#"*) echo "$line" ;;
		esac
	done <"$1"
	[ "$2" -eq 0 ] && [ -s "$1" ]
	ok $? "PyGithub accepts every answer of the fake (exit $2)"
	[ "$2" -eq 0 ] || { [ -n "${3:-}" ] && sed 's/^/#   sdk: /' "$3" | tail -n 5; }
}
