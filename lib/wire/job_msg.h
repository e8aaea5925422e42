// JOB messages (MsgType::kJob): a training job announced by its workers and agreed between
// the gateways before its first round (lib/jobs/registry.h has the rules).
//
//   worker  -> gateway  kJoin      the job's definition; sent until the gateway says running
//                                  or refused (and now and then while training: a restarted
//                                  gateway re-learns its jobs from it)
//   worker  -> gateway  kLeave     this worker is done with the job
//   gateway -> worker   kReply     where the job stands (JobStatus) and, if refused, why
//   gateway -> gateway  kAnnounce  the job as this site holds it (JobStatus), repeated every
//                                  announce interval while the job lives: idempotent state,
//                                  so a lost or duplicated message needs no retransmission
//
// The common header's job field is the job id; src_node is the sender (a gateway's site id,
// or kWorkerNodeBase + index for a worker). Every field is checked on parse.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "wire/ltp_header.h"
#include "wire/result.h"

namespace sg::wire {

enum class JobOp : uint8_t { kJoin = 1, kLeave = 2, kReply = 3, kAnnounce = 4 };
enum class JobStatus : uint8_t {
  kNone = 0,     // kJoin / kLeave: not used
  kPending = 1,  // admitted at the sender, waiting for the other sites
  kRunning = 2,  // every site holds the same definition: rounds may begin
  kRefused = 3,  // does not fit, or the sites disagree; the text says which site and field
  kEnded = 4,    // every worker left, or the job was idle for the timeout
};
const char* job_status_name(JobStatus s);

// A job's definition: every site must hold the same one.
struct JobSpec {
  uint32_t id = 0;
  uint64_t model_bytes = 0;  // float32 gradient bytes (4 x values)
  uint32_t chunk_bytes = 0;  // gradient bytes per DATA packet between workers and gateway
  uint16_t workers = 0;      // per site
  uint8_t dtype = 0;         // what the workers push: 0 float32, 1 float16, 2 bfloat16
  uint8_t weight = 1;        // its share of the WAN against other jobs, 1..16
  // Every round exactly the mean of every worker's push, or no result: no compression, no
  // Early Close, no bubbles (collectives other than a gradient's all-reduce, e.g. a process
  // group's broadcast and barrier, need bit-exact results).
  bool exact = false;
  bool operator==(const JobSpec&) const = default;
};
inline constexpr uint8_t kJobDtypes = 3;
const char* job_dtype_name(uint8_t d);
// "" if a and b agree, else the first field that differs: "model_bytes 4000 (here 8000)".
std::string job_spec_difference(const JobSpec& theirs, const JobSpec& ours);

struct JobSpecWire {
  be64 model_bytes;
  be32 chunk_bytes;
  be16 workers;
  uint8_t dtype;   // JobSpec::dtype, | kJobExactBit when exact
  uint8_t weight;
};
inline constexpr uint8_t kJobExactBit = 0x80;
static_assert(sizeof(JobSpecWire) == 16 && alignof(JobSpecWire) == 1);

struct JobHeader {
  LtpCommon common;
  uint8_t op;        // JobOp
  uint8_t status;    // JobStatus (kReply, kAnnounce)
  be16 text_len;     // bytes of UTF-8 text after the header (kReply, kAnnounce when refused)
  JobSpecWire spec;  // kJoin, kAnnounce (kReply: the gateway's definition, if it has one)
};
static_assert(sizeof(JobHeader) == 32 && alignof(JobHeader) == 1);
inline constexpr size_t kJobMaxText = 480;

struct JobMsg {
  uint16_t src_node = 0;
  JobOp op = JobOp::kJoin;
  JobStatus status = JobStatus::kNone;
  JobSpec spec;                // spec.id = the header's job
  std::string_view text;       // into the parsed buffer
};

// Checks magic, version, type, op, status and lengths; the spec's values are the registry's
// to judge (they name config keys).
Result<JobMsg> parse_job(std::span<const uint8_t> msg);
// The whole message; kNoSpace if `out` is too short; text longer than kJobMaxText is cut.
Result<size_t> build_job(std::span<uint8_t> out, uint16_t src_node, JobOp op, JobStatus status, const JobSpec& spec,
                         std::string_view text = {});

}  // namespace sg::wire
