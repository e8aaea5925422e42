// Messages of the policy consistency protocol (gateway.h) and their compact binary form,
// carried as opaque bytes inside LTP CONTROL messages. All integers big-endian:
//   'S' 'P' | format u8 (=1) | type u8 | from u16 | to u16 | nonce u64 | version u64
//   | attempt u64 | round u64 (round + 1; 0 = none) | status u8 | body
// Bodies: PROPOSE  plan_len u32 | plan bytes
//         STATE    flags u8 (1 synced, 2 prev, 4 active, 8 next) | current_round u64 (+1)
//                  | max_attempt u64 | [prev] [active] (version u64 | from_round u64 (+1)
//                  | plan_len u32 | plan) | [next] (version u64 | attempt u64
//                  | switch_round u64 (+1) | decision u8 | plan_len u32 | plan)
//         others   none
// decode() checks every length before reading and every enum range, and refuses trailing
// bytes; plan bytes stay opaque here (the gateway decodes them with topo::decode).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace sg::policy {

using Version = uint64_t;
using Round = int64_t;  // -1 = none
inline constexpr Round kNoRound = -1;
inline constexpr size_t kMaxPlanBytes = 1 << 20;
inline constexpr uint8_t kMsgFormat = 1;
inline constexpr size_t kMsgHeaderBytes = 2 + 1 + 1 + 2 + 2 + 8 + 8 + 8 + 8 + 1;

enum class MsgType : uint8_t {
  kPropose = 1,       // coordinator -> member: prepare (version, attempt) to switch at `round`
  kPrepared = 2,      // member -> coordinator: status 1 = promised, 0 = refused; round = its current round
  kDecide = 3,        // coordinator -> member: status = Decision for (version, attempt)
  kDecidedAck = 4,    // member -> coordinator: stop resending that decision
  kStateRequest = 5,  // (re)starting gateway -> peer: tell me your state; nonce = my incarnation
  kState = 6,         // reply, echoing the nonce
};
inline constexpr uint8_t kMsgTypeMax = 6;

enum class Decision : uint8_t { kUndecided = 0, kCommit = 1, kAbort = 2 };

struct PolicyRecord {
  Version version = 0;
  Round from_round = 0;
  std::vector<uint8_t> plan;  // topo::encode()d Plan
};

struct Proposal {
  Version version = 0;
  uint64_t attempt = 0;  // coordinator incarnation << 32 | sequence: never reused
  Round switch_round = 0;
  Decision decision = Decision::kUndecided;
  std::vector<uint8_t> plan;
};

struct Snapshot {
  bool synced = false;
  Round current_round = kNoRound;
  uint64_t max_attempt = 0;
  std::optional<PolicyRecord> prev, active;
  std::optional<Proposal> next;
};

struct Message {
  MsgType type = MsgType::kPropose;
  uint16_t from = 0;
  uint16_t to = 0;
  uint64_t nonce = 0;
  Version version = 0;
  uint64_t attempt = 0;
  Round round = kNoRound;
  uint8_t status = 0;
  std::vector<uint8_t> plan;  // kPropose
  Snapshot state;             // kState
};

enum class MsgError : uint8_t {
  kOk = 0,
  kTruncated,
  kBadMagic,
  kBadVersion,
  kBadType,
  kBadStatus,
  kBadRound,      // a round above the signed range
  kPlanTooLarge,
  kTrailingBytes,
};
std::string_view msg_error_name(MsgError e);

void encode(const Message& m, std::vector<uint8_t>& out);  // appends
MsgError decode(std::span<const uint8_t> bytes, Message& m);

}  // namespace sg::policy
