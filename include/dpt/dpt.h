// Everything of dpt's public API. Each header also stands alone.
#pragma once

#include "dpt/gradcheck.h"
#include "dpt/init.h"
#include "dpt/nn.h"
#include "dpt/optim.h"
#include "dpt/parallel.h"
#include "dpt/tensor.h"
#include "dpt/version.h"
