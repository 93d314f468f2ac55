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
#endif
