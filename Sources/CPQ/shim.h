#ifndef CHRONICLE_CPQ_SHIM_H
#define CHRONICLE_CPQ_SHIM_H
#include <libpq-fe.h>
#endif
