// JOB messages: round trip, and every malformed field refused.
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "wire/job_msg.h"

namespace sg::wire {
namespace {

JobSpec spec() { return JobSpec{7, 4000000, 8192, 2, 1, 3}; }

TEST(JobMsg, RoundTrip) {
  std::array<uint8_t, 600> buf{};
  auto n = build_job(buf, 0x8001, JobOp::kReply, JobStatus::kRefused, spec(), "model_bytes 8 (here 4)");
  ASSERT_TRUE(n.ok());
  auto m = parse_job(std::span<const uint8_t>(buf.data(), *n));
  ASSERT_TRUE(m.ok()) << to_string(m.error());
  EXPECT_EQ(m->src_node, 0x8001);
  EXPECT_EQ(m->op, JobOp::kReply);
  EXPECT_EQ(m->status, JobStatus::kRefused);
  EXPECT_EQ(m->spec, spec());
  EXPECT_EQ(m->text, "model_bytes 8 (here 4)");
}

TEST(JobMsg, MalformedRefused) {
  std::array<uint8_t, 600> buf{};
  const size_t n = *build_job(buf, 1, JobOp::kAnnounce, JobStatus::kPending, spec(), "abc");
  auto parse = [&](const std::vector<uint8_t>& b) { return parse_job(std::span<const uint8_t>(b.data(), b.size())); };
  const std::vector<uint8_t> good(buf.data(), buf.data() + n);
  ASSERT_TRUE(parse(good).ok());
  auto bad = good;
  bad.resize(n - 1);
  EXPECT_EQ(parse(bad).error(), WireError::kBadLength) << "text shorter than text_len";
  bad = good;
  bad.push_back(0);
  EXPECT_EQ(parse(bad).error(), WireError::kBadLength) << "trailing byte";
  bad = good;
  bad[offsetof(JobHeader, op)] = 9;
  EXPECT_EQ(parse(bad).error(), WireError::kBadField) << "unknown op";
  bad = good;
  bad[offsetof(JobHeader, status)] = 0;
  EXPECT_EQ(parse(bad).error(), WireError::kBadField) << "an announcement without a status";
  bad = good;
  bad[offsetof(JobHeader, status)] = 5;
  EXPECT_EQ(parse(bad).error(), WireError::kBadField) << "unknown status";
  bad = good;
  bad[3] = static_cast<uint8_t>(MsgType::kData);
  EXPECT_EQ(parse(bad).error(), WireError::kBadType);
  bad = good;
  bad[offsetof(JobHeader, text_len)] = 0x7f;
  EXPECT_EQ(parse(bad).error(), WireError::kBadLength) << "text_len beyond the limit";
  EXPECT_EQ(parse_job(std::span<const uint8_t>(good.data(), 20)).error(), WireError::kTruncated);
  std::array<uint8_t, 10> small{};
  EXPECT_EQ(build_job(small, 1, JobOp::kJoin, JobStatus::kNone, spec()).error(), WireError::kNoSpace);
  // A join carries no status.
  const size_t j = *build_job(buf, 1, JobOp::kJoin, JobStatus::kPending, spec());
  EXPECT_EQ(parse_job(std::span<const uint8_t>(buf.data(), j)).error(), WireError::kBadField);
}

TEST(JobMsg, DifferenceNamesTheField) {
  JobSpec a = spec(), b = spec();
  EXPECT_EQ(job_spec_difference(a, b), "");
  b.model_bytes = 8;
  EXPECT_EQ(job_spec_difference(a, b), "model_bytes 4000000 (here 8)");
  b = spec();
  b.dtype = 2;
  EXPECT_EQ(job_spec_difference(a, b), "dtype float16 (here bfloat16)");
  b = spec();
  b.weight = 1;
  EXPECT_EQ(job_spec_difference(a, b), "weight 3 (here 1)");
  b = spec();
  b.exact = true;
  EXPECT_EQ(job_spec_difference(a, b), "exact false (here true)");
}

// The exact mark rides in the dtype byte's top bit: it round-trips, leaves the dtype as it was,
// and a wrong dtype is still the registry's to refuse (not hidden by the mark).
TEST(JobMsg, ExactRoundTripsBesideTheDtype) {
  std::array<uint8_t, 600> buf{};
  JobSpec s = spec();
  s.exact = true;
  const size_t n = *build_job(buf, 0x8000, JobOp::kJoin, JobStatus::kNone, s, "");
  EXPECT_EQ(buf[offsetof(JobHeader, spec) + offsetof(JobSpecWire, dtype)], 1 | kJobExactBit);
  auto m = parse_job(std::span<const uint8_t>(buf.data(), n));
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(m->spec.exact);
  EXPECT_EQ(m->spec.dtype, 1);
  EXPECT_EQ(m->spec, s);
  s.exact = false;
  const size_t k = *build_job(buf, 0x8000, JobOp::kJoin, JobStatus::kNone, s, "");
  m = parse_job(std::span<const uint8_t>(buf.data(), k));
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(m->spec.exact);
}

}  // namespace
}  // namespace sg::wire
