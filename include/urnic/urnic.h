// The urnic public API in one include: an NDK-style (NDKPI) RoCEv2 RDMA NIC in user space.
// docs/api.md maps it onto NDKPI and lists the extensions and deviations.
#pragma once

#include "urnic/adapter.h"     // IWYU pragma: export
#include "urnic/connector.h"   // IWYU pragma: export
#include "urnic/cq.h"          // IWYU pragma: export
#include "urnic/daemon.h"      // IWYU pragma: export
#include "urnic/datagram.h"    // IWYU pragma: export
#include "urnic/engine.h"      // IWYU pragma: export
#include "urnic/extensions.h"  // IWYU pragma: export
#include "urnic/listener.h"    // IWYU pragma: export
#include "urnic/mr.h"          // IWYU pragma: export
#include "urnic/mw.h"          // IWYU pragma: export
#include "urnic/object.h"      // IWYU pragma: export
#include "urnic/pd.h"          // IWYU pragma: export
#include "urnic/qp.h"          // IWYU pragma: export
#include "urnic/route.h"       // IWYU pragma: export
#include "urnic/runtime.h"     // IWYU pragma: export
#include "urnic/srq.h"         // IWYU pragma: export
#include "urnic/status.h"      // IWYU pragma: export
#include "urnic/types.h"       // IWYU pragma: export
