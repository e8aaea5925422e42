// C ABI over sg::client::Worker: no exception crosses it.
#include <cstddef>
#include <memory>
#include <new>
#include <string>

#include "stormgate_client.h"
#include "worker.h"

static_assert(SG_DTYPE_F32 == static_cast<int>(sg::client::Dtype::kF32) &&
              SG_DTYPE_F16 == static_cast<int>(sg::client::Dtype::kF16) &&
              SG_DTYPE_BF16 == static_cast<int>(sg::client::Dtype::kBf16));

struct sg_worker {
  std::unique_ptr<sg::client::Worker> w;
  std::string error;
};

extern "C" {

void sg_worker_options_init(sg_worker_options* o) {
  if (!o) return;
  sg::client::WorkerOptions d;
  o->gateway_host = "127.0.0.1";
  o->gateway_port = d.gateway_port;
  o->gateway_node = d.gateway_node;
  o->worker_index = d.worker_index;
  o->job = d.job;
  o->chunk_bytes = d.chunk_bytes;
  o->bind_host = "0.0.0.0";
  o->bind_port = 0;
  o->token_file = nullptr;
}

void sg_job_options_init(sg_job_options* j) {
  if (!j) return;
  j->size = sizeof(sg_job_options);
  j->workers = 0;
  j->weight = 1;
  j->exact = 0;
}

int sg_worker_open(const sg_worker_options* o, sg_worker** out) { return sg_worker_open2(o, nullptr, out); }

int sg_worker_open2(const sg_worker_options* o, const sg_job_options* j, sg_worker** out) {
  if (!out) return SG_ERR_INVALID_ARGUMENT;
  *out = nullptr;
  try {
    auto* h = new sg_worker;
    *out = h;
    if (!o) {
      h->error = "no options";
      return SG_ERR_INVALID_ARGUMENT;
    }
    sg::client::WorkerOptions wo;
    wo.gateway_host = o->gateway_host ? o->gateway_host : "127.0.0.1";
    wo.gateway_port = o->gateway_port;
    wo.gateway_node = o->gateway_node;
    wo.worker_index = o->worker_index;
    wo.job = o->job;
    wo.chunk_bytes = o->chunk_bytes;
    wo.bind_host = o->bind_host ? o->bind_host : "0.0.0.0";
    wo.bind_port = o->bind_port;
    wo.token_file = o->token_file ? o->token_file : "";
    if (j) {
      // A caller built against an older, shorter sg_job_options: only what its size covers.
      constexpr size_t kV1 = offsetof(sg_job_options, weight) + sizeof(j->weight);
      if (j->size < kV1) {
        h->error = "sg_job_options.size is " + std::to_string(j->size) + ": call sg_job_options_init first";
        return SG_ERR_INVALID_ARGUMENT;
      }
      wo.announce_workers = j->workers;
      wo.weight = j->weight;
      if (j->size >= offsetof(sg_job_options, exact) + sizeof(j->exact)) wo.exact = j->exact != 0;
    }
    h->w = std::make_unique<sg::client::Worker>(wo);
    if (!h->w->status().ok()) {
      h->error = h->w->status().message;
      return static_cast<int>(h->w->status().code);
    }
    return SG_OK;
  } catch (const std::bad_alloc&) {
    return SG_ERR_SOCKET;
  }
}

void sg_worker_close(sg_worker* w) { delete w; }  // an announcing Worker sends kLeave as it goes

void sg_worker_leave(sg_worker* w) {
  if (w && w->w) w->w->leave();
}

namespace {
int call(sg_worker* w, void* data, size_t n, int dtype, uint32_t round, uint32_t timeout_ms, bool streaming) {
  if (!w) return SG_ERR_INVALID_ARGUMENT;
  if (!w->w) {
    w->error = "worker not open";
    return SG_ERR_INVALID_ARGUMENT;
  }
  if (dtype != SG_DTYPE_F32 && dtype != SG_DTYPE_F16 && dtype != SG_DTYPE_BF16) {
    w->error = "unknown dtype " + std::to_string(dtype) + " (SG_DTYPE_F32, SG_DTYPE_F16 or SG_DTYPE_BF16)";
    return SG_ERR_INVALID_ARGUMENT;
  }
  // sg_dtype and sg::client::Dtype share their values.
  const auto dt = static_cast<sg::client::Dtype>(dtype);
  try {
    const sg::Nanos t = static_cast<sg::Nanos>(timeout_ms) * sg::kMilli;
    auto s = streaming ? w->w->allreduce_streaming(data, data, n, dt, round, t) : w->w->allreduce(data, data, n, dt, round, t);
    w->error = s.message;
    return static_cast<int>(s.code);
  } catch (const std::bad_alloc&) {
    w->error = "out of memory";
    return SG_ERR_INVALID_ARGUMENT;
  }
}
}  // namespace

int sg_worker_allreduce(sg_worker* w, float* data, size_t n, uint32_t round, uint32_t timeout_ms) {
  return call(w, data, n, SG_DTYPE_F32, round, timeout_ms, false);
}

int sg_worker_allreduce_streaming(sg_worker* w, float* data, size_t n, uint32_t round, uint32_t timeout_ms) {
  return call(w, data, n, SG_DTYPE_F32, round, timeout_ms, true);
}

int sg_worker_allreduce_typed(sg_worker* w, void* data, size_t n, int dtype, uint32_t round, uint32_t timeout_ms) {
  return call(w, data, n, dtype, round, timeout_ms, false);
}

int sg_worker_allreduce_streaming_typed(sg_worker* w, void* data, size_t n, int dtype, uint32_t round,
                                        uint32_t timeout_ms) {
  return call(w, data, n, dtype, round, timeout_ms, true);
}

int sg_worker_set_push_window_kb(sg_worker* w, uint32_t kb) {
  if (!w) return SG_ERR_INVALID_ARGUMENT;
  if (!w->w) {
    w->error = "worker not open";
    return SG_ERR_INVALID_ARGUMENT;
  }
  const auto s = w->w->set_push_window_kb(kb);
  w->error = s.message;
  return static_cast<int>(s.code);
}

void sg_worker_make_ready(sg_worker* w, size_t elements) {
  if (w && w->w) w->w->make_ready(elements);
}

void sg_worker_begin_streaming(sg_worker* w) {
  if (w && w->w) w->w->begin_streaming();
}

const char* sg_worker_last_error(const sg_worker* w) { return w ? w->error.c_str() : "no worker handle"; }

const char* sg_error_name(int status) { return sg::client::error_name(static_cast<sg::client::ErrorCode>(status)); }

double sg_worker_last_round_seconds(const sg_worker* w) {
  return w && w->w ? w->w->stats().last_round_seconds : 0.0;
}

}  // extern "C"
