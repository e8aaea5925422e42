// Fuzz target for the policy layer's untrusted inputs. The first byte picks the parser:
//   even: a policy protocol message (policy/messages.h), then fed to a live gateway
//   odd:  a topology Plan (topology/plan_codec.h), as carried inside PROPOSE/STATE
// Invariants (trap on violation): whatever decodes re-encodes to the very same bytes and
// decodes again; a decoded plan passes validate(); the state machine never crashes and
// every message it emits encodes and decodes.
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "policy/gateway.h"
#include "policy/messages.h"
#include "topology/plan_codec.h"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void fuzz_plan(std::span<const uint8_t> in) {
  sg::topo::Plan plan;
  if (sg::topo::decode(in, plan) != sg::topo::PlanError::kOk) return;
  check(sg::topo::validate(plan) == sg::topo::PlanError::kOk);
  std::vector<uint8_t> out;
  check(sg::topo::encode(plan, out) == sg::topo::PlanError::kOk);
  check(out.size() == in.size() && std::equal(out.begin(), out.end(), in.begin()));
  check(out.size() == sg::topo::encoded_size(plan));
}

void fuzz_message(std::span<const uint8_t> in) {
  sg::policy::Message m;
  if (sg::policy::decode(in, m) == sg::policy::MsgError::kOk) {
    std::vector<uint8_t> out;
    sg::policy::encode(m, out);
    check(out.size() == in.size() && std::equal(out.begin(), out.end(), in.begin()));
    if (m.type == sg::policy::MsgType::kPropose) fuzz_plan(m.plan);
  }
  // Feed the bytes to a coordinator and to a member (3 gateways) and re-check their output.
  sg::policy::GatewayConfig cfg;
  cfg.gateways = 3;
  std::vector<uint8_t> boot;
  {
    sg::topo::Plan p;
    p.num_sites = 3;
    p.model_bytes = 12;
    p.shards.push_back({0, 0, 12, {sg::topo::kNoSite, 0, 0}});
    sg::topo::encode(p, boot);
  }
  for (uint16_t self : {0, 1}) {
    cfg.self = self;
    auto g = self == 0 ? sg::policy::Gateway::restarted(cfg, 1, boot, 4) : sg::policy::Gateway::fresh(cfg, boot);
    g.on_bytes(in, 0);
    g.tick(1'000'000'000);
    for (const sg::policy::Message& o : g.take_outbox()) {
      std::vector<uint8_t> b;
      sg::policy::encode(o, b);
      sg::policy::Message back;
      check(sg::policy::decode(b, back) == sg::policy::MsgError::kOk);
    }
    (void)g.may_begin(5);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::span<const uint8_t> in(data + 1, size - 1);
  if (data[0] & 1) {
    fuzz_plan(in);
  } else {
    fuzz_message(in);
  }
  return 0;
}
