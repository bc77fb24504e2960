// The one translation unit of dtrain::precompiled: the explicit instantiation definitions of every instance
// the headers name with DTRAIN_PRECOMPILED_INSTANCE (include/dtrain/core/precompiled.hpp).
#define DTRAIN_PRECOMPILED_DEFINE
#include <dtrain/dtrain.hpp>
