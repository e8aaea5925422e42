// _stormgate: the worker client for Python (pybind11). Takes any writable, C-contiguous
// float32 or float16 buffer, or 16-bit integers holding bfloat16 bits with dtype="bf16"
// (numpy arrays; torch CPU tensors through tensor.numpy() / tensor.view(torch.int16).numpy(),
// which share memory) and synchronises it in place, with the GIL released while it waits.
// python/stormgate/ wraps this with torch helpers and the DDP communication hook.
#include <pybind11/pybind11.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "worker.h"

namespace py = pybind11;
using sg::client::Dtype;
using sg::client::ErrorCode;
using sg::client::Worker;
using sg::client::WorkerOptions;

namespace {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct Timeout : Error {
  using Error::Error;
};
struct Stale : Error {
  using Error::Error;
};

[[noreturn]] void raise(const sg::client::Status& s) {
  const std::string msg = std::string(sg::client::error_name(s.code)) + ": " + s.message;
  if (s.code == ErrorCode::kTimeout) throw Timeout(msg);
  if (s.code == ErrorCode::kStale) throw Stale(msg);
  if (s.code == ErrorCode::kInvalidArgument) throw py::value_error(msg);
  throw Error(msg);
}

struct Grad {
  py::buffer_info info;
  Dtype dtype;
};

// A writable, C-contiguous gradient buffer and its Dtype, or a clear TypeError/ValueError.
// dtype "" takes the buffer's: float32 ('f') or float16 ('e'). numpy has no bfloat16, so
// "bf16" takes 16-bit integers ('h'/'H') holding bfloat16 bits.
Grad grad_buffer(py::buffer& buf, const std::string& dtype, const char* what) {
  const std::string w(what);
  Grad g{buf.request(/*writable=*/true), Dtype::kF32};
  const std::string& f = g.info.format;
  if (dtype != "" && dtype != "f32" && dtype != "f16" && dtype != "bf16")
    throw py::value_error(w + ": dtype must be \"f32\", \"f16\" or \"bf16\", got \"" + dtype + "\"");
  if (dtype == "bf16") {
    if (f != "h" && f != "H")
      throw py::type_error(w + ": dtype=\"bf16\" needs 16-bit integers holding bfloat16 bits "
                               "(tensor.view(torch.int16).numpy()), got format '" + f + "'");
    g.dtype = Dtype::kBf16;
  } else if (f == "f" && (dtype == "" || dtype == "f32")) {
    g.dtype = Dtype::kF32;
  } else if (f == "e" && (dtype == "" || dtype == "f16")) {
    g.dtype = Dtype::kF16;
  } else {
    throw py::type_error(w + " needs a float32 or float16 buffer" + (dtype.empty() ? "" : " of dtype " + dtype) +
                         ", got format '" + f + "' (bfloat16: 16-bit integers with dtype=\"bf16\")");
  }
  // C-contiguous: each stride is the product of the later dimensions.
  py::ssize_t expect = g.info.itemsize;
  for (py::ssize_t d = g.info.ndim - 1; d >= 0; --d) {
    if (g.info.shape[d] > 1 && g.info.strides[d] != expect) throw py::value_error(w + " needs a contiguous buffer");
    expect *= g.info.shape[d];
  }
  return g;
}

// One streaming round in flight: Worker::allreduce_streaming on a thread of its own, so that
// the push and the result move while Python computes what is still to be pushed. ready()
// hands over a prefix; wait() returns once the buffer holds the round's result.
class PendingRound {
 public:
  PendingRound(py::object worker, py::buffer buf, uint32_t round, double timeout_s, const std::string& dtype)
      : worker_obj_(std::move(worker)), buf_obj_(buf), grad_(grad_buffer(buf, dtype, "allreduce_start")) {
    w_ = worker_obj_.cast<Worker*>();
    n_ = static_cast<size_t>(grad_.info.size);
    void* data = grad_.info.ptr;
    const Dtype dt = grad_.dtype;
    const auto timeout = static_cast<sg::Nanos>(timeout_s * sg::kSecond);
    // wait() hands the whole buffer over even when the round has already ended (the result
    // came while Python was between ready() and wait()): that must not release this round's
    // push before its values are written.
    w_->begin_streaming();
    thread_ = std::thread(
        [this, data, dt, round, timeout] { status_ = w_->allreduce_streaming(data, data, n_, dt, round, timeout); });
  }
  ~PendingRound() {
    if (thread_.joinable()) {
      w_->make_ready(n_);  // nothing waits for the rest any more: let the call run out
      py::gil_scoped_release nogil;
      thread_.join();
    }
  }
  PendingRound(const PendingRound&) = delete;
  PendingRound& operator=(const PendingRound&) = delete;

  void ready(size_t elements) {
    if (elements > n_)
      throw py::value_error("ready(" + std::to_string(elements) + "): the buffer holds " + std::to_string(n_) + " values");
    w_->make_ready(elements);
  }
  void wait() {
    if (thread_.joinable()) {
      w_->make_ready(n_);
      py::gil_scoped_release nogil;
      thread_.join();
    }
    if (!status_.ok()) raise(status_);
  }
  void cancel() {
    if (thread_.joinable()) {
      w_->cancel();
      py::gil_scoped_release nogil;
      thread_.join();
    }
  }
  size_t size() const { return n_; }

 private:
  py::object worker_obj_;  // keeps the Worker and the buffer alive while the thread runs
  py::object buf_obj_;
  Grad grad_;
  Worker* w_ = nullptr;
  size_t n_ = 0;
  sg::client::Status status_;
  std::thread thread_;
};

}  // namespace

PYBIND11_MODULE(_stormgate, m) {
  m.doc() = "stormgate worker client (LTP over kernel UDP to the site's gateway)";
  static py::exception<Error> error(m, "StormgateError", PyExc_RuntimeError);
  static py::exception<Timeout> timeout(m, "GatewayTimeout", error.ptr());
  static py::exception<Stale> stale(m, "StaleRound", error.ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Timeout& e) {
      PyErr_SetString(timeout.ptr(), e.what());
    } catch (const Stale& e) {
      PyErr_SetString(stale.ptr(), e.what());
    } catch (const Error& e) {
      PyErr_SetString(error.ptr(), e.what());
    }
  });

  py::class_<PendingRound>(m, "PendingRound")
      .def("ready", &PendingRound::ready, py::arg("elements"),
           "buffer[:elements] is final: push it (never lowers what was handed over)")
      .def("wait", &PendingRound::wait,
           "Hand over the rest and block (GIL released) until the buffer holds the round's result")
      .def("cancel", &PendingRound::cancel,
           "End the round without pushing the rest (the gateway goes on without this worker's missing part)")
      .def("__len__", &PendingRound::size);

  py::class_<Worker>(m, "Worker")
      .def(py::init([](const std::string& host, uint16_t port, uint32_t worker_index, uint16_t gateway_node,
                       uint32_t job, uint32_t chunk_bytes, const std::string& bind_host, uint16_t bind_port,
                       const std::string& token_file, uint16_t announce_workers, int weight, bool exact,
                       uint32_t push_window_kb) {
             WorkerOptions o;
             o.gateway_host = host;
             o.gateway_port = port;
             o.worker_index = worker_index;
             o.gateway_node = gateway_node;
             o.job = job;
             o.chunk_bytes = chunk_bytes;
             o.bind_host = bind_host;
             o.bind_port = bind_port;
             o.token_file = token_file;
             o.announce_workers = announce_workers;
             if (weight < 1 || weight > 16) throw py::value_error("weight must be 1..16, got " + std::to_string(weight));
             o.weight = static_cast<uint8_t>(weight);
             o.exact = exact;
             o.push_window_kb = push_window_kb;
             auto w = std::make_unique<Worker>(o);
             if (!w->status().ok()) raise(w->status());
             return w;
           }),
           py::arg("host") = "127.0.0.1", py::arg("port") = 7400, py::arg("worker_index") = 0,
           py::arg("gateway_node") = 1, py::arg("job") = 1, py::arg("chunk_bytes") = 1344,
           py::arg("bind_host") = "0.0.0.0", py::arg("bind_port") = 0, py::arg("token_file") = "",
           py::arg("announce_workers") = 0, py::arg("weight") = 1, py::arg("exact") = false,
           py::arg("push_window_kb") = WorkerOptions{}.push_window_kb,
           "announce_workers > 0 (workers per site): this worker announces the job to the gateway before "
           "its first round of a size (refused: StormgateError naming the field; no answer: GatewayTimeout) "
           "and leaves it when closed; 0: the gateway's config holds the job. weight: the job's WAN share, 1..16. exact: every round "
           "exactly the mean of every push or no result (announced jobs; no compression, no Early Close). "
           "push_window_kb: KiB of the push in flight to the gateway (0: paced by a rate model instead).")
      .def(
          "allreduce",
          [](Worker& w, py::buffer buf, uint32_t round, double timeout_s, const std::string& dtype) {
            Grad g = grad_buffer(buf, dtype, "allreduce");
            sg::client::Status s;
            {
              py::gil_scoped_release nogil;
              s = w.allreduce(g.info.ptr, g.info.ptr, static_cast<size_t>(g.info.size), g.dtype, round,
                              static_cast<sg::Nanos>(timeout_s * sg::kSecond));
            }
            if (!s.ok()) raise(s);
          },
          py::arg("buffer"), py::arg("round"), py::arg("timeout") = 30.0, py::arg("dtype") = "",
          "Synchronise `buffer` (contiguous, writable; float32 or float16, or int16 bits of bfloat16 "
          "with dtype=\"bf16\") in place: it becomes the mean over all workers of all sites for `round`. "
          "Half-precision buffers are pushed as they are and the float32 result is rounded into them. "
          "Raises GatewayTimeout, StaleRound or StormgateError.")
      .def(
          "allreduce_start",
          [](py::object self, py::buffer buf, uint32_t round, double timeout_s, const std::string& dtype) {
            return std::make_unique<PendingRound>(std::move(self), std::move(buf), round, timeout_s, dtype);
          },
          py::arg("buffer"), py::arg("round"), py::arg("timeout") = 30.0, py::arg("dtype") = "",
          "Start a streaming round on `buffer` (as allreduce's): only what ready(k) "
          "handed over (buffer[:k]) is pushed, as it comes; wait() returns once the buffer holds the "
          "result. One round at a time per Worker; do not call allreduce meanwhile.")
      .def("leave", &Worker::leave,
           "Announcing workers: tell the gateway this worker left the job (best effort, no wait); a later "
           "allreduce registers it again. Also done when the Worker is destroyed.")
      .def_property_readonly("gateway", &Worker::gateway_address)
      .def_property_readonly("local_port", &Worker::local_port)
      .def_property_readonly("last_round_seconds", [](const Worker& w) { return w.stats().last_round_seconds; })
      .def_property_readonly("stats", [](const Worker& w) {
        const auto& s = w.stats();
        py::dict d;
        d["rounds"] = s.rounds;
        d["push_retransmits"] = s.push_retransmits;
        d["push_bytes"] = s.push_bytes;
        d["result_bubbles"] = s.result_bubbles;
        d["result_malformed"] = s.result_malformed;
        d["datagrams_sent"] = s.datagrams_sent;
        d["datagrams_received"] = s.datagrams_received;
        d["send_dropped"] = s.send_dropped;
        d["refused"] = s.refused;
        d["job_joins_sent"] = s.job_joins_sent;
        d["job_replies"] = s.job_replies;
        d["job_replies_bad"] = s.job_replies_bad;
        d["last_register_seconds"] = s.last_register_seconds;
        d["last_round_seconds"] = s.last_round_seconds;
        return d;
      });
}
