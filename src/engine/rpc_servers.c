/* rpc_servers.c - llama.cpp's RPC servers (rpc-server processes, --rpc HOST:PORT,...): checked with
 * llama.cpp's own handshake, then registered with ggml once per process, so that their devices
 * can hold a target's layers (placement.c chooses them). */
#define _DEFAULT_SOURCE
#include "rpc_servers.h"

#include "lists.h"

#include "ggml-backend.h"

#include "../util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* ggml registers a server's devices for good, and registering one twice would list its devices
 * twice: the servers registered so far, process-wide (a serve reload may name them again). */
static pthread_mutex_t rpc_lock = PTHREAD_MUTEX_INITIALIZER;
static char *rpc_registered[SPECD_MAX_DEVICES];
static int rpc_n_registered;

static bool rpc_is_registered(const char *endpoint) {
    for (int i = 0; i < rpc_n_registered; i++)
        if (!strcmp(rpc_registered[i], endpoint)) return true;
    return false;
}

typedef ggml_backend_reg_t (*rpc_add_server_fn)(const char *endpoint);

#define RPC_TIMEOUT_MS 5000

/* llama.cpp's RPC handshake (ggml-rpc.cpp, protocol 7 of the release we build): command HELLO
 * (14), a u64 size and 24 bytes of connection capabilities (zeros: plain TCP); the answer is a
 * u64 size and the version (major, minor, patch, pad) then 24 bytes of capabilities. */
enum { RPC_CMD_HELLO_ID = 14, RPC_CAPS_SIZE = 24, RPC_PROTO_MAJOR = 7 };

/* A TCP connection to "HOST:PORT" within RPC_TIMEOUT_MS, with that timeout on reads and writes;
 * -1 with *why set. */
static int rpc_connect(const char *endpoint, const char **why) {
    const char *colon = strrchr(endpoint, ':');
    char host[256];
    size_t n = colon ? (size_t)(colon - endpoint) : 0;
    if (n == 0 || n >= sizeof host || !colon[1]) return (*why = "expected HOST:PORT"), -1;
    memcpy(host, endpoint, n);
    host[n] = '\0';
    if (host[0] == '[' && host[n - 1] == ']') { /* [IPv6]:PORT */
        memmove(host, host + 1, n - 2);
        host[n - 2] = '\0';
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(host, colon + 1, &hints, &res) != 0 || !res) return (*why = "unknown host or port"), -1;
    int fd = -1;
    *why = "connection refused or timed out";
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) continue;
        bool ok = connect(fd, ai->ai_addr, ai->ai_addrlen) == 0;
        if (!ok && errno == EINPROGRESS) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            int err = 0;
            socklen_t len = sizeof err;
            ok = poll(&pfd, 1, RPC_TIMEOUT_MS) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
        }
        if (!ok) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) return -1;
    struct timeval tv = {.tv_sec = RPC_TIMEOUT_MS / 1000};
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0) {
        close(fd);
        return (*why = "cannot set up the connection"), -1;
    }
    return fd;
}

static bool read_all(int fd, void *buf, size_t n) {
    for (size_t got = 0; got < n;) {
        ssize_t r = recv(fd, (char *)buf + got, n - got, 0);
        if (r <= 0) return false;
        got += (size_t)r;
    }
    return true;
}

/* Whether "HOST:PORT" is a llama.cpp rpc-server speaking our protocol. ggml's RPC client aborts
 * the process when it cannot connect or the handshake fails, and waits forever on a service that
 * does not answer: so the handshake is tried here first, with timeouts; *why says what failed. */
static bool rpc_reachable(const char *endpoint, const char **why) {
    int fd = rpc_connect(endpoint, why);
    if (fd < 0) return false;
    unsigned char request[1 + sizeof(uint64_t) + RPC_CAPS_SIZE] = {RPC_CMD_HELLO_ID};
    uint64_t size = RPC_CAPS_SIZE;
    memcpy(request + 1, &size, sizeof size); /* host byte order, as ggml sends it */
    unsigned char answer[4 + RPC_CAPS_SIZE];
    bool ok = send(fd, request, sizeof request, MSG_NOSIGNAL) == (ssize_t)sizeof request &&
              read_all(fd, &size, sizeof size) && size == sizeof answer && read_all(fd, answer, sizeof answer);
    close(fd);
    if (!ok) *why = "it answered, but not as a llama.cpp rpc-server (wrong port?)";
    else if (answer[0] != RPC_PROTO_MAJOR) {
        *why = "its rpc-server speaks another protocol version: use the rpc-server of the same llama.cpp release";
        ok = false;
    }
    return ok;
}

static specd_status rpc_add_one(const char *endpoint, char **error) {
    if (rpc_is_registered(endpoint)) return SPECD_OK;
    ggml_backend_reg_t reg = ggml_backend_reg_by_name("RPC");
    rpc_add_server_fn add = reg ? (rpc_add_server_fn)ggml_backend_reg_get_proc_address(reg, "ggml_backend_rpc_add_server")
                                : NULL;
    if (!add) {
        specd_set_error(error, "--rpc %s: this llama.cpp was built without its RPC backend, so it cannot use an "
                        "rpc-server: rebuild it with GGML_RPC=ON (scripts/deps.sh does)", endpoint);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    if (rpc_n_registered == SPECD_MAX_DEVICES) {
        specd_set_error(error, "--rpc %s: at most %d RPC servers per process", endpoint, SPECD_MAX_DEVICES);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    const char *why = NULL;
    if (!rpc_reachable(endpoint, &why)) {
        specd_set_error(error, "cannot use the RPC server '%s': %s; is llama.cpp's rpc-server running there "
                        "(rpc-server --host ADDR --port PORT)?", endpoint, why);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    char *copy = strdup(endpoint);
    if (!copy) {
        specd_set_error(error, "out of memory for the RPC server '%s'", endpoint);
        return SPECD_ERR_NO_MEMORY;
    }
    ggml_backend_reg_t server = add(endpoint); /* NULL: no answer or no device there */
    if (!server) {
        free(copy);
        specd_set_error(error, "cannot reach the RPC server '%s' (or it has no device): is llama.cpp's rpc-server "
                        "running there (rpc-server --host ADDR --port PORT)?", endpoint);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    ggml_backend_register(server);
    rpc_registered[rpc_n_registered++] = copy;
    return SPECD_OK;
}

static specd_status visit_rpc_server(const char *endpoint, void *user, char **error) {
    (void)user;
    if (!strchr(endpoint, ':')) {
        specd_set_error(error, "--rpc '%s': expected HOST:PORT (e.g. 192.168.1.7:50052)", endpoint);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    return rpc_add_one(endpoint, error);
}

specd_status specd_rpc_servers_add(const char *servers, char **error) {
    if (!servers || !*servers) return SPECD_OK;
    pthread_mutex_lock(&rpc_lock);
    specd_status st = specd_for_each_listed(servers, "--rpc", visit_rpc_server, NULL, error);
    pthread_mutex_unlock(&rpc_lock);
    return st;
}
