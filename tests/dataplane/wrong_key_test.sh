#!/usr/bin/env bash
# Two gateway processes over a net_memif pair whose key files differ: no packet of the other
# opens; the site that receives the other's packets counts them as forged (auth bad_tag) and
# says within seconds that the key files may not match (with its key's fingerprint); no
# round begins (the sites never agree on a policy: lib/policy's start-up exchange cannot
# open), both say they wait for their peers' policy state, and return every mbuf.
# The two end 2 s apart (different durations): processes on one memif pair that stop at
# the same instant have crashed in the memif PMD under ASan once here (1 run in 12).
#   wrong_key_test.sh STORMGATE_BINARY
set -uo pipefail
BIN="$1"
source "$(dirname "$0")/memif_pair.sh"
memif_pair_init sgwk
fail() { echo "FAIL: $*"; for s in a b; do echo "--- $s"; tail -8 "$tmp/$s.log"; done; exit 1; }

for s in a b; do
  if [[ $s == a ]]; then me=1; peer=2; role=server; else me=2; peer=1; role=client; fi
  "$BIN" --keygen "$tmp/$s.key" > /dev/null || fail "keygen"
  cat > "$tmp/$s.yaml" <<YAML
site: {id: $me, name: site-$s}
ports:
  - {name: link, vdev: "net_memif0,role=$role,id=0,socket=$sock", ipv4: 10.89.0.$me, mac: "02:00:00:00:0$me:00"}
peers:
  - {id: $peer, name: site-x, address: 10.89.0.$peer}
telemetry: {stats_interval_ms: 0, pdump: false}
dataplane: {mbufs: 4095}
job: {model_bytes: 200000, rounds: 2, round_timeout_ms: 2000}
security: {key_file: $tmp/$s.key}
YAML
done
lcore=(0 1)
i=0
for s in a b; do
  memif_pair_start $s -l 0-1 --main-lcore "${lcore[$i]}" --no-huge --no-pci -m 192 \
    --log-level='*:warning' --log-level='stormgate.control:info' -- --config "$tmp/$s.yaml" --duration $((i == 0 ? 8 : 6))
  i=$((i + 1))
done
memif_pair_wait
warned=0
for s in a b; do
  echo "--- site $s"; grep -E 'fingerprint|key files|messages from|sealed:|job 1:|mbuf pool' "$tmp/$s.log"
  grep -qE 'sealed: [0-9]+ messages sealed, 0 opened' "$tmp/$s.log" || fail "site $s opened a packet sealed under another key"
  if grep -qE 'refused:.* bad_tag=[1-9]' "$tmp/$s.log"; then
    grep -q 'do the key files match' "$tmp/$s.log" || fail "site $s refused forged packets but did not say the key files may differ"
    # ... and which peer they came from, with the reason, at most once per 10 s per source.
    n=$(grep -cE 'messages from peer [a-z-]+: [0-9]+ refused \(.*bad_tag [0-9]+' "$tmp/$s.log")
    [[ $n -ge 1 && $n -le 2 ]] || fail "site $s: $n lines naming the peer whose packets were refused (want 1 or 2 in 8 s)"
    warned=$((warned + 1))
  fi
  grep -qE 'job 1: 0 rounds ' "$tmp/$s.log" || fail "site $s began a round without agreeing on a policy with its peer"
  grep -q 'waiting for the peers' "$tmp/$s.log" || fail "site $s did not say it waits for its peers"
  grep -Eq 'mbuf pool: ([0-9]+) of \1 back' "$tmp/$s.log" || fail "site $s: pool not full"
done
[[ $warned -ge 1 ]] || fail "no site received the other's packets"
[[ "$(grep -o 'key fingerprint [0-9a-f]*' "$tmp/a.log" | head -1)" != "$(grep -o 'key fingerprint [0-9a-f]*' "$tmp/b.log" | head -1)" ]] ||
  fail "different key files gave the same fingerprint"
i=0
for s in a b; do
  memif_exit_ok $s "${codes[$i]}" || fail "site $s exit ${codes[$i]}"
  i=$((i + 1))
done
echo ok
