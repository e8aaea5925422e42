#include "aggregate/accumulator.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>

namespace sg::agg {

std::string_view agg_error_name(AggError e) {
  switch (e) {
    case AggError::kOk: return "ok";
    case AggError::kChunkIndex: return "chunk index out of range";
    case AggError::kLength: return "payload length does not match the chunk";
    case AggError::kContributors: return "bad contributor count";
  }
  return "unknown";
}

void Accumulator::FreeAligned::operator()(float* p) const { std::free(p); }

Accumulator::Accumulator(size_t total_elems, size_t chunk_elems, Isa isa)
    : total_(total_elems), chunk_elems_(chunk_elems), isa_(isa), k_(&add_kernels(isa)) {
  if (chunk_elems == 0 || total_elems == 0) throw std::invalid_argument("Accumulator: empty layout");
  if (!isa_supported(isa)) throw std::invalid_argument("Accumulator: ISA not supported by this CPU");
  const size_t chunks = (total_elems + chunk_elems - 1) / chunk_elems;
  if (chunks > std::numeric_limits<uint32_t>::max()) throw std::invalid_argument("Accumulator: too many chunks");
  chunks_ = static_cast<uint32_t>(chunks);
  // Cache-line aligned so every chunk of a multiple-of-16 size starts on a line.
  const size_t bytes = (total_elems * sizeof(float) + 63) / 64 * 64;
  data_.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
  if (!data_) throw std::bad_alloc();
  counts_ = std::make_unique<uint32_t[]>(chunks_);
  fresh_ = std::make_unique<uint8_t[]>(chunks_);
  reset();
}

size_t Accumulator::chunk_elems(uint32_t chunk) const {
  const size_t begin = static_cast<size_t>(chunk) * chunk_elems_;
  return begin >= total_ ? 0 : std::min(chunk_elems_, total_ - begin);
}

AggError Accumulator::can_add(uint32_t chunk, uint32_t contributors) const {
  if (chunk >= chunks_) return AggError::kChunkIndex;
  if (contributors == 0 || counts_[chunk] > std::numeric_limits<uint32_t>::max() - contributors)
    return AggError::kContributors;
  return AggError::kOk;
}

AggError Accumulator::add(uint32_t chunk, std::span<const uint8_t> payload, uint32_t contributors) {
  if (AggError e = can_add(chunk, contributors); e != AggError::kOk) return e;
  const size_t n = chunk_elems(chunk);
  if (payload.size() != n * sizeof(float)) return AggError::kLength;
  float* dst = slice(chunk).data();
  if (fresh_[chunk])
    std::memcpy(dst, payload.data(), payload.size());  // the first contribution: nothing to add to
  else
    k_->add(dst, payload.data(), n);
  count(chunk, contributors);
  return AggError::kOk;
}

void Accumulator::materialise(uint32_t chunk) const {
  if (!fresh_[chunk]) return;
  const std::span<float> d = slice(chunk);
  std::memset(d.data(), 0, d.size_bytes());
  fresh_[chunk] = 0;
}

Accumulator::Target Accumulator::decode_target(uint32_t chunk) {
  return {slice(chunk), fresh_[chunk] != 0};
}

std::span<float> Accumulator::chunk_data(uint32_t chunk) {
  materialise(chunk);
  return slice(chunk);
}

std::span<const float> Accumulator::chunk_values(uint32_t chunk) const {
  materialise(chunk);
  return slice(chunk);
}

std::span<const float> Accumulator::values() const {
  for (uint32_t c = 0; c < chunks_; ++c) materialise(c);
  return {data_.get(), total_};
}

void Accumulator::finalise(Finalise mode) {
  for (uint32_t c = 0; c < chunks_; ++c) finalise_chunk(c, mode);
}

void Accumulator::finalise_chunk(uint32_t chunk, Finalise mode) {
  if (chunk >= chunks_) return;
  materialise(chunk);  // count 0: nothing arrived, the result is zero
  // Count 1: dividing changes nothing.
  if (mode == Finalise::kSum || counts_[chunk] <= 1) return;
  const std::span<float> d = slice(chunk);
  k_->divide(d.data(), d.size(), static_cast<float>(counts_[chunk]));
}

void Accumulator::reset() {
  std::memset(counts_.get(), 0, chunks_ * sizeof(uint32_t));
  std::memset(fresh_.get(), 1, chunks_);
#ifndef NDEBUG
  std::fill(data_.get(), data_.get() + total_, std::numeric_limits<float>::quiet_NaN());
#endif
}

}  // namespace sg::agg
