// How a gateway fills the 16-bit path_id of LTP DATA (ltp_header.h), in the dataplane and in
// the simulator alike (lib/spray). lib/ltp treats it as opaque: the receiver echoes the
// path_id of the latest DATA in its ACKs, which is what lets the sender account in-flight
// data per path.
//
//   bit 15      relayed: the frame's IP destination is a relay site, not the final one
//   bits 12-14  the sender's path slot towards the destination (0..7, see lib/spray/sprayer.h)
//   bits 0-11   relayed only: the destination site id (so relayed sites need ids < 4096)
//
// Direct DATA is slot << 12 (slot 0: path_id 0, what a plain single-path sender sends). A
// gateway receiving DATA whose relayed bit is set and whose destination is not itself forwards
// it unchanged (same LTP bytes, new Ethernet/IP/UDP headers) to that destination. The
// destination accepts it as from the header's src_node and answers (ACK/CLOSE) directly.
#pragma once

#include <cstdint>

#include "wire/ltp_header.h"

namespace sg::wire::pathid {

// The limits live with the header (ltp_header.h) so the config checks them.
inline constexpr uint16_t kRelayed = kPathRelayed;
inline constexpr unsigned kSlotShift = kPathSlotShift;
inline constexpr uint16_t kSlotMask = kPathSlotMask;
inline constexpr uint16_t kDstMask = kPathDstMask;
inline constexpr uint16_t kMaxSlots = kPathSlots;
// (kMaxRelayedSite, the site ids a relay can name, is in ltp_header.h)

constexpr uint16_t direct(unsigned slot) { return static_cast<uint16_t>((slot & kSlotMask) << kSlotShift); }
constexpr uint16_t relayed(unsigned slot, uint16_t dst_site) {
  return static_cast<uint16_t>(kRelayed | ((slot & kSlotMask) << kSlotShift) | (dst_site & kDstMask));
}
constexpr bool is_relayed(uint16_t id) { return (id & kRelayed) != 0; }
constexpr unsigned slot(uint16_t id) { return (id >> kSlotShift) & kSlotMask; }
constexpr uint16_t destination(uint16_t id) { return id & kDstMask; }

static_assert(slot(relayed(5, 42)) == 5 && destination(relayed(5, 42)) == 42 && is_relayed(relayed(5, 42)));
static_assert(direct(0) == 0 && !is_relayed(direct(7)) && slot(direct(7)) == 7);

}  // namespace sg::wire::pathid
