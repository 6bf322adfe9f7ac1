/*
 * rpcserver.h - the users' old JSON C ABI, unchanged, from libspecd-rpcserver.so (a drop-in
 * replacement: relink, no code changes). Each function forwards to its specd_ twin in
 * specd_rpc.h, which goes through the one JSON-RPC dispatcher; speculative decoding is on when
 * init is given a draft model (-md), and each request may tune or disable it ("speculative").
 *
 * Strings: as before, the returned strings are heap copies the old library never freed; they
 * come from malloc, so apps that want to stop the leak may pass them to free(). The library
 * exports nothing but these names.
 */
#ifndef RPCSERVER_H
#define RPCSERVER_H

#ifdef __cplusplus
extern "C" {
#endif

int init(const char *cmd);
void init_async(const char *cmd);
const char *poll_system_status(void);
const char *tokenize(const char *req);
const char *get_completion(const char *req);
const char *async_completion_init(const char *req);
const char *async_completion_poll(const char *cmd);
const char *async_completion_cancel(const char *req);
void deinit(void);

#ifdef __cplusplus
}
#endif

#endif /* RPCSERVER_H */
