#include "wire/job_msg.h"

#include <algorithm>
#include <cstring>

namespace sg::wire {

const char* job_status_name(JobStatus s) {
  switch (s) {
    case JobStatus::kNone: return "none";
    case JobStatus::kPending: return "pending";
    case JobStatus::kRunning: return "running";
    case JobStatus::kRefused: return "refused";
    case JobStatus::kEnded: return "ended";
  }
  return "unknown";
}

const char* job_dtype_name(uint8_t d) {
  static const char* const names[kJobDtypes] = {"float32", "float16", "bfloat16"};
  return d < kJobDtypes ? names[d] : "unknown";
}

std::string job_spec_difference(const JobSpec& theirs, const JobSpec& ours) {
  auto field = [](const char* name, const std::string& a, const std::string& b) {
    return std::string(name) + " " + a + " (here " + b + ")";
  };
  if (theirs.model_bytes != ours.model_bytes)
    return field("model_bytes", std::to_string(theirs.model_bytes), std::to_string(ours.model_bytes));
  if (theirs.chunk_bytes != ours.chunk_bytes)
    return field("chunk_bytes", std::to_string(theirs.chunk_bytes), std::to_string(ours.chunk_bytes));
  if (theirs.workers != ours.workers)
    return field("workers", std::to_string(theirs.workers), std::to_string(ours.workers));
  if (theirs.dtype != ours.dtype) return field("dtype", job_dtype_name(theirs.dtype), job_dtype_name(ours.dtype));
  if (theirs.weight != ours.weight) return field("weight", std::to_string(theirs.weight), std::to_string(ours.weight));
  if (theirs.exact != ours.exact) return field("exact", theirs.exact ? "true" : "false", ours.exact ? "true" : "false");
  return {};
}

Result<JobMsg> parse_job(std::span<const uint8_t> msg) {
  if (msg.size() < sizeof(JobHeader)) return WireError::kTruncated;
  const auto* h = reinterpret_cast<const JobHeader*>(msg.data());
  if (h->common.magic.load() != kLtpMagic) return WireError::kBadMagic;
  if (!(h->common.version >= kLtpMinVersion && h->common.version <= kLtpMaxVersion)) return WireError::kBadVersion;
  if (h->common.type != static_cast<uint8_t>(MsgType::kJob)) return WireError::kBadType;
  if ((h->common.flags & ~kFlagSealed) != 0) return WireError::kBadField;
  if (h->op < static_cast<uint8_t>(JobOp::kJoin) || h->op > static_cast<uint8_t>(JobOp::kAnnounce))
    return WireError::kBadField;
  if (h->status > static_cast<uint8_t>(JobStatus::kEnded)) return WireError::kBadField;
  const size_t text = h->text_len.load();
  if (text > kJobMaxText) return WireError::kBadLength;
  if (msg.size() != sizeof(JobHeader) + text) return WireError::kBadLength;
  JobMsg m;
  m.src_node = h->common.src_node.load();
  m.op = static_cast<JobOp>(h->op);
  m.status = static_cast<JobStatus>(h->status);
  if ((m.op == JobOp::kReply || m.op == JobOp::kAnnounce) == (m.status == JobStatus::kNone))
    return WireError::kBadField;  // a status exactly on replies and announcements
  m.spec.id = h->common.job.load();
  m.spec.model_bytes = h->spec.model_bytes.load();
  m.spec.chunk_bytes = h->spec.chunk_bytes.load();
  m.spec.workers = h->spec.workers.load();
  m.spec.dtype = static_cast<uint8_t>(h->spec.dtype & ~kJobExactBit);
  m.spec.exact = (h->spec.dtype & kJobExactBit) != 0;
  m.spec.weight = h->spec.weight;
  m.text = std::string_view(reinterpret_cast<const char*>(msg.data() + sizeof(JobHeader)), text);
  return m;
}

Result<size_t> build_job(std::span<uint8_t> out, uint16_t src_node, JobOp op, JobStatus status, const JobSpec& spec,
                         std::string_view text) {
  text = text.substr(0, kJobMaxText);
  const size_t len = sizeof(JobHeader) + text.size();
  if (out.size() < len) return WireError::kNoSpace;
  auto* h = reinterpret_cast<JobHeader*>(out.data());
  std::memset(out.data(), 0, sizeof(JobHeader));
  h->common.magic.store(kLtpMagic);
  h->common.version = kLtpVersion;
  h->common.type = static_cast<uint8_t>(MsgType::kJob);
  h->common.src_node.store(src_node);
  h->common.job.store(spec.id);
  h->op = static_cast<uint8_t>(op);
  h->status = static_cast<uint8_t>(status);
  h->text_len.store(static_cast<uint16_t>(text.size()));
  h->spec.model_bytes.store(spec.model_bytes);
  h->spec.chunk_bytes.store(spec.chunk_bytes);
  h->spec.workers.store(spec.workers);
  h->spec.dtype = static_cast<uint8_t>(spec.dtype | (spec.exact ? kJobExactBit : 0));
  h->spec.weight = spec.weight;
  if (!text.empty()) std::memcpy(out.data() + sizeof(JobHeader), text.data(), text.size());
  return len;
}

}  // namespace sg::wire
