// LTP wire format: packed big-endian headers carried as the UDP payload. Every field is
// uint8_t or sg::beNN (alignment 1), so structs have no padding by construction; sizes and
// alignment are asserted (gcc ignores [[gnu::packed]] on non-POD members, so we do not rely on it).
//
// Every message starts with LtpCommon. magic, version and type sit at fixed offsets in
// every version, so a receiver can always answer a version it does not speak with REJECT.
// Layout changes bump kLtpVersion; new fields go in reserved bytes or a new version.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/endian.h"

namespace sg::wire {

inline constexpr uint16_t kLtpMagic = 0x4c54;  // "LT"
inline constexpr uint8_t kLtpVersion = 1;      // what we send
inline constexpr uint8_t kLtpMinVersion = 1;   // what we accept
inline constexpr uint8_t kLtpMaxVersion = 1;

enum class MsgType : uint8_t {
  kData = 1,     // one chunk of a transfer
  kAck = 2,      // receiver -> sender: cumulative point + selective bitmap
  kClose = 3,    // receiver -> sender: transfer ended, which chunks were kept
  kControl = 4,  // reliable small control-plane message (or a pure ack of one)
  kReject = 5,   // "I do not speak your version" (or other refusal)
  kProbe = 6,    // one packet of a probe train on a link no job traffic measures
  kJob = 7,      // a job announced by its workers and agreed between gateways (job_msg.h)
};

// Flag bits (LtpCommon::flags).
inline constexpr uint8_t kFlagRetransmit = 0x01;  // DATA: not the first transmission of this chunk
// Sealed by the sending gateway (lib/crypto): on the wire a kAuthTrailerLen trailer follows
// the message; the receiver checks it and cuts it off before any LTP parsing, so parsers never
// see it. Part of the authenticated header: nobody can strip it to pass as plain traffic.
inline constexpr uint8_t kFlagSealed = 0x02;
inline constexpr uint8_t kFlagMore = 0x04;        // CLOSE: more bitmap parts follow
// DATA: the sender has not yet released every chunk of the transfer (it forwards chunks as
// its own inputs complete), so a quiet transfer is waiting upstream, not lost: no Early Close.
inline constexpr uint8_t kFlagPartial = 0x08;
// DATA: sent while the sender had nothing more to send (app-limited, in BBR's sense: it ran
// dry since the chunks in flight left): the rate this copy arrives at is what the sender
// offered, not what the link carries. The receiver's link estimator keeps such traffic from
// lowering its estimate of the link (lib/measure).
inline constexpr uint8_t kFlagAppLimited = 0x10;
// ACK: answers DATA the receiver held while it had not begun that round, sent in a burst
// once it did: the ACKs' spacing is the replay's, not the path's, so the sender takes no
// rate from their timing (their echo already leaves the hold out of its RTT).
inline constexpr uint8_t kFlagHeld = 0x20;
inline constexpr uint8_t kKnownFlags =
    kFlagRetransmit | kFlagSealed | kFlagMore | kFlagPartial | kFlagAppLimited | kFlagHeld;

// The sealed message's trailer (crypto::kTrailerLen): be64 sequence (key epoch, sender lane,
// packet number) then the 16-byte AEAD tag; the LTP header is the associated data.
inline constexpr size_t kAuthTrailerLen = 24;

struct LtpCommon {
  be16 magic;
  uint8_t version;
  uint8_t type;   // MsgType
  uint8_t flags;
  uint8_t reserved;
  be16 src_node;  // sending gateway id (keys transfers independent of IP addresses)
  be32 job;
};
static_assert(sizeof(LtpCommon) == 12 && alignof(LtpCommon) == 1);

// Node ids (src_node): gateways' site ids below kWorkerNodeBase, a site's training workers
// from it up (kWorkerNodeBase + worker index; lib/sync/local_group.h).
inline constexpr uint16_t kWorkerNodeBase = 0x8000;
inline constexpr uint16_t kMaxSiteId = kWorkerNodeBase - 1;

// DATA path_id bit 15: the copy crossed a relay site (NetStorm multipath), so its arrival
// measures the relay's link, not the sender's. The rest of path_id is the sender's business
// (lib/ltp echoes it in ACKs; the gateway's layout is in path_id.h).
inline constexpr uint16_t kPathRelayed = 0x8000;
// The gateway's path_id layout (path_id.h): bits 12-14 name one of a peer's path
// slots, bits 0-11 a relayed copy's destination site. The limits every config must respect.
inline constexpr unsigned kPathSlotShift = 12;
inline constexpr uint16_t kPathSlotMask = 0x7;
inline constexpr uint16_t kPathSlots = kPathSlotMask + 1;      // paths per peer
inline constexpr uint16_t kPathDstMask = (1u << kPathSlotShift) - 1;
inline constexpr uint16_t kMaxRelayedSite = kPathDstMask;      // site ids a relayed copy can name
static_assert((kPathRelayed & (kPathSlotMask << kPathSlotShift)) == 0 && (kPathSlotMask << kPathSlotShift & kPathDstMask) == 0);

struct DataHeader {
  LtpCommon common;
  be32 round;
  be32 policy_version;
  be16 shard;
  be16 path_id;       // which path (direct or via a relay site) this copy took
  be32 chunk_index;   // < chunk_count
  be32 chunk_count;   // chunks in this transfer (same in every DATA of it)
  be16 contributors;  // sites whose gradients are summed into this chunk (>= 1)
  uint8_t codec;      // sg::CodecId
  // Holes: bit i set = the sender had nothing for part i of this chunk (none of its inputs
  // arrived; part 0 is the whole chunk unless the payload packs several compressed chunks,
  // lib/sync). The receiver counts it delivered and adds nothing there, so a mean over what
  // arrived stays unbiased.
  uint8_t holes;
  be16 payload_len;   // bytes after this header, before the optional tag
  be16 reserved2;
  be64 send_ts;       // sender clock, ns
  be64 echo_ts;       // latest ACK ack_ts seen from this receiver (0 = none): receiver RTT
};
static_assert(sizeof(DataHeader) == 56 && alignof(DataHeader) == 1);
// 1392 B payload + header + trailer fit a 1500 B IP MTU: 20 + 8 + 56 + 1392 + 24 = 1500.
static_assert(20 + 8 + sizeof(DataHeader) + 1392 + kAuthTrailerLen == 1500);

struct AckHeader {
  LtpCommon common;
  be32 round;
  be32 policy_version;
  be16 shard;
  be16 path_id;   // path of the DATA that triggered this ACK
  be32 cum_ack;   // every chunk index < cum_ack has arrived
  be32 received;  // distinct chunks held so far
  be64 ack_ts;    // receiver clock when sent; the sender echoes it in DATA::echo_ts
  be64 echo_ts;   // send_ts of the DATA that triggered this ACK: sender RTT
  be32 sack_base; // chunk index of bit 0 of sack[]
  uint8_t sack[64];  // bit i (LSB first in byte i/8) = chunk sack_base + i has arrived
};
inline constexpr uint32_t kAckSackBits = 8 * sizeof(AckHeader::sack);
static_assert(sizeof(AckHeader) == 116 && alignof(AckHeader) == 1);
static_assert(kAckSackBits == 512);

enum class CloseReason : uint8_t {
  kComplete = 0,    // every chunk arrived
  kEarlyClose = 1,  // enough arrived and progress stalled; the rest were filled
  kSuperseded = 2,  // the receiver moved on to a later round; the rest were filled
  kAbandoned = 3,   // nothing arrived for too long; the rest were filled
  kStale = 4,       // the DATA was for a round/policy the receiver no longer accepts
  kRefused = 5,     // no room for a new transfer, or the transfer is too large
};
inline constexpr uint8_t kCloseReasonCount = 6;

struct CloseHeader {
  LtpCommon common;
  be32 round;
  be32 policy_version;
  be16 shard;
  uint8_t reason;     // CloseReason
  uint8_t fill_rule;  // how missing chunks were filled (ltp::FillRule)
  be32 chunk_count;
  be32 kept_count;    // chunks that arrived (the rest are bubbles)
  be32 bitmap_base;   // chunk index of the first bit below; multiple of 8
  be16 bitmap_bytes;  // kept-bitmap bytes following this header (0 = no bitmap)
  be16 reserved;
};
static_assert(sizeof(CloseHeader) == 40 && alignof(CloseHeader) == 1);
// One part covers 8192 chunks; longer transfers send several parts, kFlagMore on all but the last.
inline constexpr size_t kCloseMaxBitmapBytes = 1024;

struct ControlHeader {
  LtpCommon common;
  be16 channel;      // lets several control conversations share a peer
  be16 payload_len;  // opaque bytes after the header
  be32 seq;          // 1.. for a message; 0 = pure ack (no payload)
  be32 ack;          // every peer seq < ack was delivered
  be32 session;      // the sender's incarnation: a newer one means it restarted (0: not told)
  be64 send_ts;
};
static_assert(sizeof(ControlHeader) == 36 && alignof(ControlHeader) == 1);
inline constexpr size_t kControlMaxPayload = 1200;

// A probe train: `count` packets sent back to back by src_node to dst_node so that their
// spacing at the receiver shows the path's rate (the dispersion of a packet train). The
// padding after the header makes every packet as large as a DATA packet of the job.
struct ProbeHeader {
  LtpCommon common;
  be32 train;        // the sender's train number
  be16 seq;          // 0..count-1
  be16 count;        // packets in the train (>= 2)
  be16 dst_node;     // the site the train measures the link to
  be16 payload_len;  // padding bytes after this header (zero on the wire)
  be64 send_ts;      // sender clock, ns
  // Zero on the wire. The receiving gateway writes its arrival time (ns) here, in its own
  // copy, before it hands the packet to the control thread.
  be64 rx_ts;
};
static_assert(sizeof(ProbeHeader) == 40 && alignof(ProbeHeader) == 1);
inline constexpr uint16_t kProbeMaxCount = 64;
inline constexpr uint16_t kProbeMaxPayload = 9000;

enum class RejectReason : uint8_t { kVersion = 1, kType = 2 };

struct RejectHeader {
  LtpCommon common;  // version = our kLtpVersion
  uint8_t reason;    // RejectReason
  uint8_t min_version;
  uint8_t max_version;
  uint8_t offending_version;
};
static_assert(sizeof(RejectHeader) == 16 && alignof(RejectHeader) == 1);

}  // namespace sg::wire
