// Per-round gradient accumulator of one shard: float32 sums split into chunks, with the
// number of contributors per chunk (a chunk that arrives already summed over a subtree
// brings that subtree's count, and chunks filled by Bubble Filling bring none, so a mean
// divides each chunk by its own count and stays unbiased).
//
// Owned by one engine (lcore); not thread-safe. All memory is allocated in the
// constructor; add() and finalise() allocate nothing.
//
// reset() zeroes no sums: it marks every chunk *fresh* (its bytes are stale, its value zero).
// The first add() into a fresh chunk copies instead of adding, and every path that reads or
// writes a chunk's values otherwise zeroes a fresh chunk first. A memset of the whole model
// per round was a pass over memory the first contribution writes anyway (1.7-3.3% of the
// gateway's cycles on perf/bench dataplane), and for a large shard a stall at the round's
// start (5 ms for 256 MB) while the NIC's receive rings fill. Debug builds fill fresh chunks
// with NaN, so a read that skipped the zeroing shows in every test's result.
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
  // write through decode_target() (overwrite: the chunk is fresh, so the decoder writes
  // instead of adding), then count(). Nothing changes until count().
  AggError can_add(uint32_t chunk, uint32_t contributors) const;
  struct Target {
    std::span<float> data;
    bool overwrite;
  };
  Target decode_target(uint32_t chunk);
  void count(uint32_t chunk, uint32_t contributors) {
    counts_[chunk] += contributors;
    fresh_[chunk] = 0;
  }
  // The chunk's values to read or change in place (a fresh chunk is zeroed first).
  std::span<float> chunk_data(uint32_t chunk);

  std::span<const float> chunk_values(uint32_t chunk) const;
  // Every value (fresh chunks zeroed first: a pass over those).
  std::span<const float> values() const;
  // The sums' memory as it is, for a streaming sender that reads a chunk only once it is
  // complete: chunk c holds its values once contributors(c) > 0, or after chunk_data,
  // chunk_values or finalise_chunk(c). Stable address for the accumulator's lifetime.
  std::span<const float> storage() const { return {data_.get(), total_}; }
  uint32_t contributors(uint32_t chunk) const { return counts_[chunk]; }

  // Turns the sums into the round's result, in place. Call once per round.
  void finalise(Finalise mode);
  // The same for one chunk (streaming: a chunk is final before the others). Call at most
  // once per chunk and round, and never together with finalise().
  void finalise_chunk(uint32_t chunk, Finalise mode);

  // Sums and counts back to zero for the next round (marks every chunk fresh: see above).
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
  // Zeroes chunk c if it is fresh. Logically const: a fresh chunk's value is zero already.
  void materialise(uint32_t chunk) const;
  // Chunk `chunk`'s slice of the storage as it is (fresh chunks hold stale values).
  std::span<float> slice(uint32_t chunk) const {
    return {data_.get() + static_cast<size_t>(chunk) * chunk_elems_, chunk_elems(chunk)};
  }

  std::unique_ptr<float[], FreeAligned> data_;  // 64-byte aligned, padded to 64 bytes
  std::unique_ptr<uint32_t[]> counts_;
  std::unique_ptr<uint8_t[]> fresh_;  // 1: the chunk's bytes are stale, its value zero
};

}  // namespace sg::agg
