#include "ltp/bubble_fill.h"

#include <algorithm>
#include <cstring>

namespace sg::ltp {

uint16_t fill_bubble(FillRule rule, std::span<uint8_t> dst, std::span<const uint8_t> previous,
                     uint16_t previous_contributors, std::span<const uint8_t> local) {
  std::span<const uint8_t> src;
  uint16_t contributors = 0;
  if (rule == FillRule::kPrevious) {
    src = previous;
    contributors = previous_contributors;
  } else if (rule == FillRule::kLocal) {
    src = local;
    contributors = 1;
  }
  if (src.size() < dst.size()) {
    // No (complete) source: zeros are the only unbiased choice.
    std::memset(dst.data(), 0, dst.size());
    return 0;
  }
  std::memcpy(dst.data(), src.data(), dst.size());
  return contributors;
}

MessageSink::MessageSink(size_t max_bytes, uint32_t chunk_size, uint32_t max_chunks)
    : buf_(max_bytes), contrib_(max_chunks), filled_(max_chunks), seen_(max_chunks), chunk_size_(chunk_size) {}

void MessageSink::reset() {
  std::fill(contrib_.begin(), contrib_.end(), 0);
  std::fill(filled_.begin(), filled_.end(), 0);
  std::fill(seen_.begin(), seen_.end(), 0);
  len_ = 0;
  bound_ = false;
  ended_ = false;
  chunks_ = bubbles_ = 0;
}

bool MessageSink::accept(const ChunkRef& c) {
  if (!bound_) {
    key_ = c.key;
    bound_ = true;
    len_ = std::min(buf_.size(), static_cast<size_t>(c.chunk_count) * chunk_size_);
  }
  if (!(c.key == key_) || c.chunk_index >= seen_.size() || ended_ ||
      static_cast<size_t>(c.chunk_index) * chunk_size_ >= buf_.size() || seen_[c.chunk_index]) {
    ++errors_;
    return false;
  }
  seen_[c.chunk_index] = 1;
  return true;
}

void MessageSink::on_chunk(const ChunkRef& c, std::span<const uint8_t> payload) {
  if (!accept(c)) return;
  const size_t off = static_cast<size_t>(c.chunk_index) * chunk_size_;
  if (payload.size() > chunk_size_ || off + payload.size() > buf_.size()) {
    ++errors_;
    return;
  }
  std::memcpy(buf_.data() + off, payload.data(), payload.size());
  // The last chunk may be short: the message ends where it ends.
  if (c.chunk_index + 1 == c.chunk_count) len_ = off + payload.size();
  contrib_[c.chunk_index] = c.contributors;
  ++chunks_;
}

void MessageSink::on_bubble(const ChunkRef& c, FillRule rule) {
  if (!accept(c)) return;
  const size_t off = static_cast<size_t>(c.chunk_index) * chunk_size_;
  const size_t n = std::min<size_t>(chunk_size_, len_ > off ? len_ - off : 0);
  auto dst = std::span<uint8_t>(buf_).subspan(off, n);
  auto prev = previous_.size() >= off + n ? previous_.subspan(off, n) : std::span<const uint8_t>{};
  auto loc = local_.size() >= off + n ? local_.subspan(off, n) : std::span<const uint8_t>{};
  contrib_[c.chunk_index] = fill_bubble(rule, dst, prev, prev_contrib_, loc);
  filled_[c.chunk_index] = 1;
  ++bubbles_;
}

void MessageSink::on_transfer_end(const TransferSummary& s) {
  if (bound_ && !(s.key == key_)) {
    ++errors_;
    return;
  }
  ended_ = true;
  summary_ = s;
}

}  // namespace sg::ltp
