// DPDK log types, one per component, so users filter with
// --log-level=stormgate.dataplane:debug (STYLE: datapath anomalies are counted, not logged).
#pragma once

#include <rte_log.h>

extern int sg_logtype_dataplane;
extern int sg_logtype_control;

#define SG_LOG(level, type, ...) rte_log(RTE_LOG_##level, sg_logtype_##type, "stormgate: " __VA_ARGS__)
