#ifndef CHRONICLE_CLZ4_SHIM_H
#define CHRONICLE_CLZ4_SHIM_H
#include <lz4.h>
#include <lz4frame.h>
#endif
