/* rpcserver_compat.c - libspecd-rpcserver.so: the old ABI's exact names, forwarding to the
 * specd_ functions. Only this file's symbols are exported (see cmake/rpc.cmake). */
#include "rpcserver.h"
#include "specd_rpc.h"

#define EXPORT __attribute__((visibility("default")))

EXPORT int init(const char *cmd) { return specd_init(cmd); }
EXPORT void init_async(const char *cmd) { specd_init_async(cmd); }
EXPORT const char *poll_system_status(void) { return specd_poll_system_status(); }
EXPORT const char *tokenize(const char *req) { return specd_tokenize_json(req); }
EXPORT const char *get_completion(const char *req) { return specd_get_completion(req); }
EXPORT const char *async_completion_init(const char *req) { return specd_async_completion_init(req); }
EXPORT const char *async_completion_poll(const char *cmd) { return specd_async_completion_poll(cmd); }
EXPORT const char *async_completion_cancel(const char *req) { return specd_async_completion_cancel(req); }
EXPORT void deinit(void) { specd_deinit(); }
