#!/usr/bin/env bash
# A gateway killed with SIGKILL mid-training and started again: it learns the cluster's policy
# state from its peer (lib/policy's restart exchange over CONTROL channels that start over
# with the new incarnation), rejoins at the round the cluster runs, and the job finishes at
# both sites. Two gateways (3 sites would need 3 namespaces for no more coverage) on a veth
# pair between two network namespaces this test creates, over net_af_packet; a synthetic job
# (every result checkable against the exact mean), sealed.
#   kill_restart_test.sh STORMGATE_BINARY [member|coordinator]
# Checks: both runs of the killed site and the survivor end by themselves with every mbuf
# back; the new run says it rejoined at a round > 1 and runs to the job's last round, every
# value of its rounds equal to the exact mean; the survivor's round while its peer was down
# ends by timeout, or -- the peer back in time -- with the new incarnation's chunks; every
# other round exactly; the survivor ran every round of the job.
# Prints the job's wall time (the faults bench compares it with a run without the kill).
set -uo pipefail
BIN="$1"
WHO="${2:-member}"
ROUNDS="${SG_KR_ROUNDS:-150}"
KILL_AT="${SG_KR_KILL_AT:-20}"  # the survivor's completed rounds when the other is killed
DOWN_S="${SG_KR_DOWN_S:-1}"
NOKILL="${SG_KR_NOKILL:-}"     # set: the same run without the kill (the faults bench's baseline)
tag="sgkr$$"
source "$(dirname "${BASH_SOURCE[0]}")/two_sites.sh"
for s in a b; do
  if [[ $s == a ]]; then me=1; peer=2; dev="$tag-x"; else me=2; peer=1; dev="$tag-y"; fi
  cat > "$tmp/$s.yaml" <<YAML
site: {id: $me, name: site-$s}
ports:
  - {name: wan, vdev: "net_af_packet0,iface=$dev", ipv4: 10.87.0.$me, mac: "02:00:00:00:0$me:00"}
peers:
  - {id: $peer, name: site-x, address: 10.87.0.$peer, mac: "02:00:00:00:0$peer:00"}
telemetry: {stats_interval_ms: 500, pdump: false}
dataplane: {mbufs: 4095}
job: {model_bytes: 1000000, rounds: $ROUNDS, round_timeout_ms: 1500}
security: {key_file: $tmp/wan.key}
YAML
done
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0"
start() {  # site, log, lcore
  local s="$1"
  # No `timeout` wrapper: SIGKILL must reach the gateway itself (ip netns exec execs it);
  # --duration bounds the run and cleanup kills what is left.
  ip netns exec "$tag-$s" "$BIN" -l 0-1 --main-lcore "$3" --no-huge --no-pci -m 192 \
    --file-prefix "$tag-$s-$2" --log-level='*:warning' --log-level='stormgate.control:info' ${SG_KR_LOG:+--log-level="$SG_KR_LOG"} -- \
    --config "$tmp/$s.yaml" --duration 90 > "$tmp/$2.log" 2>&1 &
}
# The coordinator is site 1 (a); `member` kills b, `coordinator` kills a.
victim=b; survivor=a; [[ $WHO == coordinator ]] && { victim=a; survivor=b; }
lc_v=1; lc_s=0
t0=$(date +%s.%N)
start "$survivor" survivor "$lc_s"; pid_s=$!; pids+=("$pid_s")
start "$victim" first "$lc_v"; pid_v=$!; pids+=("$pid_v")
completed() { sed -n 's/.*| rounds \([0-9]*\), last.*/\1/p' "$tmp/survivor.log" | tail -1; }
if [[ -z $NOKILL ]]; then
  for _ in $(seq 1 600); do
    r=$(completed); [[ -n $r && $r -ge $KILL_AT ]] && break
    kill -0 "$pid_s" 2>/dev/null || fail "the survivor ended before the kill"
    sleep 0.05
  done
  [[ -n $(completed) && $(completed) -ge $KILL_AT ]] || fail "the survivor did not reach round $KILL_AT"
  kill -KILL "$pid_v"; wait "$pid_v" 2>/dev/null
  t_kill=$(date +%s.%N)
  echo "killed site $victim (SIGKILL) after the survivor completed round $(completed)"
  sleep "$DOWN_S"
  rm -rf /var/run/dpdk/"$tag-$victim-first"
  start "$victim" second "$lc_v"; pid_v=$!; pids+=("$pid_v")
  echo "started site $victim again"
  # The survivor's rounds time out (round_timeout_ms 1500) until its peer is back: as many as
  # the outage holds, however long the restart takes on a loaded machine (EAL start-up, the
  # rejoin, its first round), plus the one under way at each end.
  # The outage ends when the new incarnation has run a round, not when it has learnt where the
  # job is: under AddressSanitizer on a loaded CI machine a restarted site that had said
  # "rejoining" after 1.3 s still lost its first rounds, and so did the survivor (3 each).
  # Its stats line (every 500 ms) counts the rounds it ended, by timeout or not.
  for _ in $(seq 1 600); do
    grep -q "rejoining the running job" "$tmp/second.log" 2>/dev/null &&
      grep -q "| rounds [1-9]" "$tmp/second.log" 2>/dev/null && break
    sleep 0.05
  done
  t_back=$(date +%s.%N)
  lost_max=$(awk -v a="$t_kill" -v b="$t_back" 'BEGIN { print int((b - a) / 1.5) + 2 }')
  echo "peer back after $(awk -v a="$t_kill" -v b="$t_back" 'BEGIN { printf "%.1f", b - a }') s: at most $lost_max rounds may time out"
fi
lost_max="${lost_max:-2}"
wait "$pid_s"; code_s=$?
wait "$pid_v"; code_v=$?
t1=$(date +%s.%N)
pids=()
second="$tmp/second.log"; [[ -n $NOKILL ]] && second="$tmp/first.log"
for f in "$tmp/survivor.log" "$second"; do
  echo "--- $(basename "$f")"; grep -E 'policy state|job 1:|mbuf pool|sealed:' "$f"
  grep -Eq 'mbuf pool: ([0-9]+) of \1 back' "$f" || fail "$(basename "$f"): pool not full"
done
grep -q "job 1: $ROUNDS rounds" "$tmp/survivor.log" || fail "the survivor did not run the job's $ROUNDS rounds"
for c in "$code_s" "$code_v"; do
  [[ $c == 0 ]] || fail "a gateway exited with $c"
done
if [[ -z $NOKILL ]]; then
  rejoin=$(sed -n 's/.*rejoining the running job at round \([0-9]*\).*/\1/p' "$second" | head -1)
  [[ -n $rejoin && $rejoin -gt 1 ]] || fail "the restarted gateway did not rejoin the running job"
  last=$(sed -n 's/.*job 1: \([0-9]*\) rounds.*/\1/p' "$second")
  [[ $((rejoin + last - 1)) -eq $ROUNDS ]] ||
    fail "the restarted gateway ran $last rounds from round $rejoin, not to round $ROUNDS"
  # The survivor learnt of the new process from its control channel and gave up, for its
  # running round, what the old one owed it (SiteSync::peer_restarted).
  grep -q "site [0-9]* restarted (a new process)" "$tmp/survivor.log" ||
    fail "the survivor did not see its peer's restart"
fi
# Exact wherever nothing was lost: only rounds that ended by timeout (the survivor's while
# its peer was down, when there is a kill) or gave up what a peer that moved on had not sent
# (the new run's first, when the survivor timed that round out: what the dead incarnation
# had taken is gone) may differ, at most as many as the outage holds at each site (2 without
# a kill); and the chunks either site filled as bubbles
# (counted losses: a bubble at one site is in both sites' means), one chunk each
# (transport.chunk_bytes 1344: 336 values). A CI run measured one Early Close bubble at the
# survivor and its 336 inexact values at the other site, in a round the other counted nothing.
# The run without the kill is held to the same rule: an Early Close bubble is LTP's design
# (counted), not an error, and a CI run of the faults bench once tripped on one there.
bubbles=$(cat "$tmp/survivor.log" "$second" | sed -n 's/.*job 1: .* bubbles up \([0-9]*\) down \([0-9]*\),.*/\1 \2/p' |
          awk '{b += $1 + $2} END {print b + 0}')
# The restarted site may lose one round more than the outage holds: the survivor's round under
# way at its return (one it will never serve) runs on to its timeout, up to round_timeout_ms
# after the return, while the restarted site has begun a later round and waits for it. A CI
# run measured 2 timeouts and 1 peer moved on at the restarted site after a 1.3 s outage (its
# values exact everywhere else).
for f in "$tmp/survivor.log" "$second"; do
  lost_f=$lost_max
  [[ -z $NOKILL && $f == "$second" ]] && lost_f=$((lost_max + 1))
  awk -v b="$bubbles" -v lost_max="$lost_f" -v per_round=250000 -v per_chunk=336 '/job 1:/ {
         for (i = 1; i <= NF; ++i) { if ($(i + 1) == "rounds") n = $i; if ($i == "timeouts") t += $(i + 1)
                                     if ($i == "on" && $(i - 1) == "moved") t += $(i + 1)
                                     if ($i == "mean" && $(i + 1) == "100.0000%") e = 100; else if ($(i - 1) == "mean") e = $i + 0 } }
       END { off = (100 - e) / 100 * n * per_round
             exit !(n > 0 && t <= lost_max && off <= t * per_round + b * per_chunk + 1e-6 * n * per_round) }' "$f" ||
    fail "$(basename "$f"): values differ from the exact mean beyond the rounds that lost something (at most $lost_f) and the bubbles ($bubbles)"
done
awk -v a="$t0" -v b="$t1" 'BEGIN {printf "wall %.3f s\n", b - a}'
echo ok
