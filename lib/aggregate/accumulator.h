// Per-round gradient accumulator of one shard: float32 sums split into chunks, with the
// number of contributors per chunk (a chunk that arrives already summed over a subtree
// brings that subtree's count, and chunks filled by Bubble Filling bring none, so a mean
// divides each chunk by its own count and stays unbiased).
//
// Owned by one engine (lcore); not thread-safe. All memory is allocated in the
// constructor; add() and finalise() allocate nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "aggregate/add_kernels.h"
#include "aggregate/isa.h"

namespace sg::agg {

enum class AggError : uint8_t {
  kOk = 0,
  kChunkIndex,      // chunk index >= chunk_count()
  kLength,          // payload length != 4 * chunk_elems(chunk)
  kContributors,    // contributors == 0, or the chunk's count would overflow uint32
};
std::string_view agg_error_name(AggError e);

enum class Finalise : uint8_t {
  kSum,   // leave the sums
  kMean,  // divide each chunk by its contributor count (chunks with count 0 stay zero)
};

class Accumulator {
 public:
  // `total_elems` floats in chunks of `chunk_elems` (the last chunk may be shorter).
  // `isa` must be supported (isa_supported); tests and benchmarks force one here.
  Accumulator(size_t total_elems, size_t chunk_elems, Isa isa = best_isa());

  size_t total_elems() const { return total_; }
  uint32_t chunk_count() const { return chunks_; }
  size_t chunk_elems(uint32_t chunk) const;
  Isa isa() const { return isa_; }

  // Adds a received float32 payload (little-endian, any alignment, read in place: the
  // caller keeps owning the bytes) into `chunk`, counted as `contributors` contributions.
  // On error nothing changes.
  AggError add(uint32_t chunk, std::span<const uint8_t> payload, uint32_t contributors = 1);

  // For decoders that add into the sums themselves (compress/accumulate.h): check, then
  // write through chunk_data(), then count().
  AggError can_add(uint32_t chunk, uint32_t contributors) const;
  std::span<float> chunk_data(uint32_t chunk);
  void count(uint32_t chunk, uint32_t contributors) { counts_[chunk] += contributors; }

  std::span<const float> chunk_values(uint32_t chunk) const;
  std::span<const float> values() const { return {data_.get(), total_}; }
  uint32_t contributors(uint32_t chunk) const { return counts_[chunk]; }

  // Turns the sums into the round's result, in place. Call once per round.
  void finalise(Finalise mode);
  // The same for one chunk (streaming: a chunk is final before the others). Call at most
  // once per chunk and round, and never together with finalise().
  void finalise_chunk(uint32_t chunk, Finalise mode);

  // Zeroes sums and counts for the next round.
  void reset();

 private:
  struct FreeAligned {
    void operator()(float* p) const;
  };
  size_t total_;
  size_t chunk_elems_;
  uint32_t chunks_;
  Isa isa_;
  const AddKernels* k_;
  std::unique_ptr<float[], FreeAligned> data_;  // 64-byte aligned, padded to 64 bytes
  std::unique_ptr<uint32_t[]> counts_;
};

}  // namespace sg::agg
