#ifndef CHRONICLE_CMICROHTTPD_SHIM_H
#define CHRONICLE_CMICROHTTPD_SHIM_H
#include <stdarg.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>
#endif
