# Sourced by the tests that run two gateway processes on one net_memif pair (site a the
# memif server, site b the client): a scratch directory, the socket, starting and awaiting
# both gateways, judging their exit codes, and cleaning up.
#   source memif_pair.sh; memif_pair_init PREFIX   # sets tmp, sock; traps EXIT
#   memif_pair_start a ARGS...; memif_pair_start b ARGS...   # "$BIN" ARGS > $tmp/<site>.log
#   memif_pair_wait          # codes[0] and codes[1]: the exit codes of a and b
#   memif_exit_ok a "${codes[0]}" || ...
# KEEP=1 keeps the logs (the path is printed).

memif_pair_init() {
  _mp_prefix="$1$$"
  tmp="$(mktemp -d)"
  [[ -n "${KEEP:-}" ]] && echo "logs in $tmp"
  sock="/run/$_mp_prefix.sock"
  pids=()
  codes=()
  trap memif_pair_cleanup EXIT
  # The memif PMD's own cleanup can crash after the final report (see memif_exit_ok); under
  # AddressSanitizer that SEGV in DPDK's interrupt thread became an abort (134) or a hang
  # while the sanitizer walked a half-freed DPDK heap. Let it stay a plain SIGSEGV.
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0"
}

memif_pair_cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  [[ -n "${KEEP:-}" ]] || rm -rf "$tmp"
  rm -rf "$sock" "/var/run/dpdk/$_mp_prefix-a" "/var/run/dpdk/$_mp_prefix-b"
}

# Site $1's gateway in the background, bounded to 60 s, with its own DPDK file prefix.
memif_pair_start() {
  local s="$1"
  shift
  timeout 60 "$BIN" --file-prefix "$_mp_prefix-$s" "$@" > "$tmp/$s.log" 2>&1 &
  pids+=($!)
}

memif_pair_wait() {
  local p c
  codes=()
  for p in "${pids[@]}"; do
    wait "$p"
    c=$?
    codes+=("$c")
  done
  pids=()
}

# The memif PMD may segfault in EAL cleanup after everything was reported: exit 139 counts
# as a clean end only once the final report, pool check included, is complete.
memif_exit_ok() {
  local s="$1" c="$2"
  [[ $c == 0 ]] || { [[ $c == 139 ]] && grep -q 'mbuf pool: \([0-9]*\) of \1 back' "$tmp/$s.log"; }
}
