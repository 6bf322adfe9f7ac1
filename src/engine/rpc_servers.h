/* rpc_servers.h - llama.cpp RPC servers as ggml devices (--rpc). */
#ifndef SPECD_RPC_SERVERS_H
#define SPECD_RPC_SERVERS_H

#include "specd.h"

/* Registers the RPC servers of `servers` ("HOST:PORT,...") with ggml, once per process and
 * server (ggml's device registry is global and keeps them). Each is first tried with llama.cpp's
 * RPC handshake under a timeout (ggml's client aborts the process on a server it cannot use).
 * Fails, naming the server, when this llama.cpp was built without GGML_RPC or a server cannot be
 * used. NULL or "": nothing. Any thread. */
specd_status specd_rpc_servers_add(const char *servers, char **error);

#endif
