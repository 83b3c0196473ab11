# Shared by the examples' try.sh scripts (sourced, not run): the --wait and --run handling around
# an example's list of curl commands.

# try_wait ADDR waits until coxswain's admin /readyz at ADDR answers (30 s at most).
try_wait() {
	local addr=${1:?usage: try.sh --wait ADMIN_ADDRESS}
	for _ in $(seq 300); do
		if curl -sf "http://$addr/readyz" >/dev/null 2>&1; then return 0; fi
		sleep 0.1
	done
	echo "coxswain did not become ready; see its log above" >&2
	return 1
}

# try_run COMMAND... runs each command, after printing it; a command that begins with "#" is a
# heading, printed as it is.
try_run() {
	local c
	for c in "$@"; do
		if [[ $c == "#"* ]]; then
			echo "$c"
			continue
		fi
		echo "\$ $c"
		bash -c "$c" || true
		echo
	done
}
