/* stormgate worker client, C ABI (libstormgate_client.so). For C programs, ctypes/cffi and
 * other languages; C++ code may use sg::client::Worker (client/worker.h) directly.
 *
 *   sg_worker_options o;
 *   sg_worker_options_init(&o);
 *   o.gateway_host = "10.0.0.1"; o.worker_index = 2;
 *   sg_worker* w = NULL;
 *   if (sg_worker_open(&o, &w) != SG_OK) { puts(sg_worker_last_error(w)); }
 *   int rc = sg_worker_allreduce(w, grad, n, round, 30000);   // grad := global mean
 *   if (rc != SG_OK) fprintf(stderr, "%s: %s\n", sg_error_name(rc), sg_worker_last_error(w));
 *   sg_worker_close(w);
 *
 * A handle is used by one thread at a time. Strings returned stay valid until the next
 * call on the same handle. */
#ifndef STORMGATE_CLIENT_H
#define STORMGATE_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum sg_status {
  SG_OK = 0,
  SG_ERR_INVALID_ARGUMENT = 1,
  SG_ERR_SOCKET = 2,
  SG_ERR_TIMEOUT = 3, /* gateway unreachable or no result in time; the message names the address */
  SG_ERR_STALE = 5,   /* the gateway is already past this round */
  SG_ERR_REJECTED = 6,
  SG_ERR_PROTOCOL = 7
};

/* Element types of a gradient buffer. F16 (IEEE binary16) and BF16 buffers are pushed as they
 * are (half the bytes of float32); the float32 result is rounded to the buffer's type (nearest
 * even) as it is written back. The gateway's job.model_bytes stays 4 x n either way. */
enum sg_dtype { SG_DTYPE_F32 = 0, SG_DTYPE_F16 = 1, SG_DTYPE_BF16 = 2 };

typedef struct sg_worker_options {
  const char* gateway_host; /* IPv4 address or name; default "127.0.0.1" */
  uint16_t gateway_port;    /* default 7400 */
  uint16_t gateway_node;    /* the gateway's site.id; default 1 */
  uint32_t worker_index;    /* 0..workers-1 */
  uint32_t job;             /* default 1 */
  uint32_t chunk_bytes;     /* default 1344 */
  const char* bind_host;    /* default "0.0.0.0" */
  uint16_t bind_port;       /* default 0 (any) */
  const char* token_file;   /* the gateway's job.token_file; default NULL (plain LTP) */
} sg_worker_options;

/* Announcing the job to the gateway (the gateway then needs no job in its YAML): pass one to
 * sg_worker_open2. `size` lets the struct grow without breaking binaries built against this
 * version: sg_job_options_init sets it, and the library reads only the fields it covers. */
typedef struct sg_job_options {
  uint32_t size;     /* sizeof(sg_job_options), set by sg_job_options_init */
  uint16_t workers;  /* workers per site (the job's job.workers); > 0 announces the job, 0 does
                        not (the gateway's config holds it); at most 4096; default 0 */
  uint8_t weight;    /* the job's share of the WAN against other jobs, 1..16; default 1 */
  uint8_t exact;     /* 1: every round exactly the mean of every push or no result (no
                        compression, no Early Close, no bubbles); default 0 */
} sg_job_options;

typedef struct sg_worker sg_worker;

void sg_worker_options_init(sg_worker_options* o);
/* Always sets *out (also on error, so that sg_worker_last_error can explain); close it. */
int sg_worker_open(const sg_worker_options* o, sg_worker** out);
void sg_job_options_init(sg_job_options* j);
/* sg_worker_open, and with j->workers > 0 the worker announces the job: the first allreduce
 * of a size sends the job's definition (job, 4 x n model bytes, chunk_bytes, workers, dtype,
 * weight) to the gateway until it answers running (the round goes on), refused
 * (SG_ERR_REJECTED, sg_worker_last_error says why) or the timeout passes (SG_ERR_TIMEOUT).
 * sg_worker_close (or sg_worker_leave) tells the gateway this worker left the job. j NULL:
 * as sg_worker_open. */
int sg_worker_open2(const sg_worker_options* o, const sg_job_options* j, sg_worker** out);
/* Announcing workers: sends one "left the job" message now (best effort, no wait); a later
 * allreduce registers the job again. Nothing for a worker that does not announce. */
void sg_worker_leave(sg_worker* w);
void sg_worker_close(sg_worker* w);
/* data[0..n) := mean over all workers of all sites for `round`. timeout in ms. */
int sg_worker_allreduce(sg_worker* w, float* data, size_t n, uint32_t round, uint32_t timeout_ms);
/* Streaming (overlap the push with the computation producing it): like sg_worker_allreduce,
 * but only data[0, ready) is pushed, where ready is what another thread last passed to
 * sg_worker_make_ready (up to n); returns once data holds the result. Values below ready must
 * not change any more. sg_worker_make_ready is the one call another thread may make meanwhile. */
int sg_worker_allreduce_streaming(sg_worker* w, float* data, size_t n, uint32_t round, uint32_t timeout_ms);
/* The same for n elements of `dtype` (an sg_dtype); ready counts elements. */
int sg_worker_allreduce_typed(sg_worker* w, void* data, size_t n, int dtype, uint32_t round, uint32_t timeout_ms);
int sg_worker_allreduce_streaming_typed(sg_worker* w, void* data, size_t n, int dtype, uint32_t round,
                                        uint32_t timeout_ms);
/* Between rounds: KiB of the push in flight to the gateway from the next round on (default 64;
 * 0: paced by a rate model instead; at most 1048576). SG_ERR_INVALID_ARGUMENT beyond, nothing
 * changed. The C++ and Python clients set it with their options (push_window_kb). */
int sg_worker_set_push_window_kb(sg_worker* w, uint32_t kb);
void sg_worker_make_ready(sg_worker* w, size_t elements);
/* Before starting the thread of the next streaming call: forgets a make_ready that reached the
 * last call after it had returned (it would release the next push before its values are written). */
void sg_worker_begin_streaming(sg_worker* w);
const char* sg_worker_last_error(const sg_worker* w);
const char* sg_error_name(int status);
/* Seconds the last successful allreduce took. */
double sg_worker_last_round_seconds(const sg_worker* w);

#ifdef __cplusplus
}
#endif

#endif
