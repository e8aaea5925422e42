# Sourced by the system tests that run one gateway in a network namespace of their own, with
# the kernel on the other side of its port as its only peer (site 2 facing "site" 1: the
# kernel never answers, so the gateway's CONTROL and the job's LTP keep coming), a 64 KB job
# without workers. The tests differ in the port and what they capture; the gateway is this.

# lone_gateway_yaml OUT NAME VDEV NET JOB SECURITY: NET is a /24's first three octets (the
# gateway .1, the kernel .2); SECURITY the config's security line.
lone_gateway_yaml() {
  local out="$1" name="$2" vdev="$3" net="$4" job="$5" security="$6"
  cat > "$out" <<YAML
site: {id: 2, name: $name}
ports:
  - {name: p0, vdev: "$vdev", ipv4: $net.1, mac: "02:00:00:00:00:01"}
peers:
  - {id: 1, name: kernel, address: $net.2, mac: "02:00:00:00:00:02"}
telemetry: {stats_interval_ms: 0}
dataplane: {mbufs: 4095}
job: {id: $job, model_bytes: 65536, workers: 0, round_timeout_ms: 300}
$security
YAML
}

# lone_gateway_start NS BIN PREFIX YAML LOG SECONDS [EAL ARGS...]: starts the gateway in NS
# in the background (its pid in $gw) and waits up to 5 s for it to say it runs.
lone_gateway_start() {
  local ns="$1" bin="$2" prefix="$3" yaml="$4" log="$5" secs="$6"
  shift 6
  ip netns exec "$ns" "$bin" -l 0-1 --no-huge --no-pci -m 128 --file-prefix "$prefix" --log-level='*:warning' "$@" \
    -- --config "$yaml" --duration "$secs" > "$log" 2>&1 &
  gw=$!
  for _ in $(seq 50); do grep -q running "$log" && break; sleep 0.1; done
}
