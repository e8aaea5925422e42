#include "dataplane/log.h"

RTE_LOG_REGISTER(sg_logtype_dataplane, stormgate.dataplane, INFO);
RTE_LOG_REGISTER(sg_logtype_control, stormgate.control, INFO);
