#ifndef CHRONICLE_CMICROHTTPD_SHIM_H
#define CHRONICLE_CMICROHTTPD_SHIM_H
#include <stdarg.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>

// Swift cannot call C variadic functions, so the few libmicrohttpd entry
// points that are variadic are reached only through these tiny wrappers.

/// Starts a daemon bound to exactly `bind_address` (MHD_OPTION_SOCK_ADDR; the
/// port inside it may be 0 to let the kernel pick one). `port` repeats that
/// port for MHD's own messages only; the address decides where it binds.
///
/// The option types match what MHD reads with va_arg: unsigned int for the
/// pool size, connection limit and timeout; size_t for the memory limit. The
/// logger comes first so that errors while starting reach it too.
static inline struct MHD_Daemon *
chronicle_mhd_start_daemon(unsigned int flags,
                           uint16_t port,
                           const struct sockaddr *bind_address,
                           MHD_AccessHandlerCallback access_handler,
                           void *access_handler_cls,
                           MHD_RequestCompletedCallback completed,
                           void *completed_cls,
                           MHD_LogCallback logger,
                           void *logger_cls,
                           void *(*uri_logger)(void *, const char *, struct MHD_Connection *),
                           void *uri_logger_cls,
                           MHD_NotifyConnectionCallback notify_connection,
                           void *notify_connection_cls,
                           unsigned int thread_pool_size,
                           unsigned int connection_limit,
                           unsigned int connection_timeout_seconds,
                           size_t connection_memory_limit_bytes)
{
    return MHD_start_daemon(flags, port, NULL, NULL,
                            access_handler, access_handler_cls,
                            MHD_OPTION_EXTERNAL_LOGGER, logger, logger_cls,
                            MHD_OPTION_SOCK_ADDR, bind_address,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, completed_cls,
                            MHD_OPTION_URI_LOG_CALLBACK, uri_logger, uri_logger_cls,
                            MHD_OPTION_NOTIFY_CONNECTION, notify_connection, notify_connection_cls,
                            MHD_OPTION_THREAD_POOL_SIZE, thread_pool_size,
                            MHD_OPTION_CONNECTION_LIMIT, connection_limit,
                            MHD_OPTION_CONNECTION_TIMEOUT, connection_timeout_seconds,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, connection_memory_limit_bytes,
                            MHD_OPTION_END);
}

/// The port the daemon's listen socket is bound to (the real one when 0 was
/// asked for), or 0 if MHD cannot tell.
static inline uint16_t
chronicle_mhd_bind_port(struct MHD_Daemon *daemon)
{
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}

/// The socket of a connection, or -1 if MHD cannot tell.
static inline int
chronicle_mhd_connection_fd(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : info->connect_fd;
}

/// The daemon's listen socket, or -1 if MHD cannot tell.
static inline int
chronicle_mhd_listen_fd(struct MHD_Daemon *daemon)
{
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_LISTEN_FD);
    return info == NULL ? -1 : info->listen_fd;
}

/// The peer address of a connection, or NULL if MHD cannot tell.
static inline const struct sockaddr *
chronicle_mhd_client_address(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return info == NULL ? NULL : info->client_addr;
}

/// The flags every Chronicle daemon runs with: MHD's own polling threads
/// (epoll on Linux, chosen by MHD_USE_AUTO), suspend/resume for long-poll
/// (which implies an inter-thread channel so a resume wakes the worker), and
/// error messages routed to the external logger (never to stderr).
static inline unsigned int
chronicle_mhd_default_flags(void)
{
    return (unsigned int)(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO
                          | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG);
}

#endif
