#ifndef CHRONICLE_CSQLITE_SHIM_H
#define CHRONICLE_CSQLITE_SHIM_H
#include <sqlite3.h>

// SQLITE_TRANSIENT is a macro casting -1 to a function pointer, which Swift
// cannot import; these wrappers make SQLite copy the bytes before returning.
static inline int chronicle_bind_text(sqlite3_stmt *stmt, int index, const char *text, int length) {
    return sqlite3_bind_text(stmt, index, text, length, SQLITE_TRANSIENT);
}
static inline int chronicle_bind_blob(sqlite3_stmt *stmt, int index, const void *bytes, int length) {
    return sqlite3_bind_blob(stmt, index, bytes, length, SQLITE_TRANSIENT);
}
static inline void chronicle_result_blob(sqlite3_context *ctx, const void *bytes, int length) {
    sqlite3_result_blob(ctx, bytes, length, SQLITE_TRANSIENT);
}
static inline int chronicle_result_text(sqlite3_context *ctx, const char *text, int length) {
    sqlite3_result_text(ctx, text, length, SQLITE_TRANSIENT);
    return 0;
}
// sqlite3_db_config is variadic; one wrapper per option we use.
static inline int chronicle_enable_defensive(sqlite3 *db) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)0);
}
static inline int chronicle_set_defensive(sqlite3 *db, int on) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, on, (int *)0);
}
// sqlite3_config is variadic. Memory statistics off: with them on, every allocation of every
// connection takes one process-wide mutex. Only before SQLite is initialized (else SQLITE_MISUSE).
static inline int chronicle_config_memstatus(int on) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, on);
}
// The FTS5 extension API of one connection (https://sqlite.org/fts5.html#extending_fts5):
// `SELECT fts5(?1)` with a pointer bound under the type "fts5_api_ptr" hands it back.
// The type string must outlive the statement, hence a literal here.
static inline fts5_api *chronicle_fts5_api(sqlite3 *db) {
    fts5_api *api = 0;
    sqlite3_stmt *stmt = 0;
    if (sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &stmt, 0) != SQLITE_OK) return 0;
    sqlite3_bind_pointer(stmt, 1, (void *)&api, "fts5_api_ptr", 0);
    sqlite3_step(stmt);
    sqlite3_finalize(stmt);
    return api;
}
#endif
