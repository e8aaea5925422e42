#include "ltp/tcp_cc.h"

#include "ltp/aimd_controller.h"
#include "ltp/cubic_controller.h"
#include "ltp/delivery_rate_controller.h"

namespace sg::ltp {

std::unique_ptr<RateController> make_tcp_controller(TcpCc cc) {
  switch (cc) {
    case TcpCc::kCubic: return std::make_unique<CubicController>();
    case TcpCc::kBbr: return std::make_unique<DeliveryRateController>();
    case TcpCc::kNewReno: break;
  }
  return std::make_unique<AimdController>();
}

}  // namespace sg::ltp
