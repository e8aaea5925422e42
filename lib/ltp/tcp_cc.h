// The congestion controls of the TCP-like baselines: NewReno, CUBIC (Linux's default) and
// BBR-like (the delivery-rate controller, which a kernel set to `tcp_congestion_control =
// bbr` resembles: it does not back off on random loss). Baselines pick one; LTP does not.
#pragma once

#include <cstdint>
#include <memory>

#include "ltp/rate_controller.h"

namespace sg::ltp {

enum class TcpCc : uint8_t { kNewReno, kCubic, kBbr };

std::unique_ptr<RateController> make_tcp_controller(TcpCc cc);

}  // namespace sg::ltp
