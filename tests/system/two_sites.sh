# Sourced by the two-gateway system tests (set `tag` and `BIN` first): network namespaces
# $tag-a and $tag-b joined by a veth pair ($tag-x in a, $tag-y in b, offloads off so that
# net_af_packet sees whole checksummed frames), a key file $tmp/wan.key, and a cleanup on
# exit that kills what the test put in `pids` and removes all of it. `fail MSG` prints the
# logs' tails and exits 1; without root the test is skipped (77).
tmp="$(mktemp -d)"; [[ -n "${KEEP:-}" ]] && echo "logs in $tmp"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  sleep 0.2
  ip netns del "$tag-a" 2>/dev/null; ip netns del "$tag-b" 2>/dev/null
  [[ -n "${KEEP:-}" ]] || rm -rf "$tmp"
  rm -rf /var/run/dpdk/"$tag"*
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$tmp"/*.log; do echo "--- $f"; grep -v '\] rx ' "$f" | tail -15; done; exit 1; }
[[ $(id -u) == 0 ]] || { echo "SKIP: needs root (network namespaces)"; exit 77; }

ip netns add "$tag-a" && ip netns add "$tag-b" || fail "netns"
ip link add "$tag-x" netns "$tag-a" type veth peer name "$tag-y" netns "$tag-b" || fail "veth"
for s in a b; do
  dev="$tag-x"; [[ $s == b ]] && dev="$tag-y"
  ip netns exec "$tag-$s" ip link set lo up
  ip netns exec "$tag-$s" ip link set "$dev" up
  ip netns exec "$tag-$s" ethtool -K "$dev" tx off rx off gso off tso off gro off > /dev/null 2>&1 || true
done
"$BIN" --keygen "$tmp/wan.key" > /dev/null || fail "keygen"
