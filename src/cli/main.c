/* main.c - the specd program: dispatches to its subcommands. */
#define _DEFAULT_SOURCE
#include "cli.h"

#include <stdio.h>
#include <unistd.h>
#include <string.h>

static void usage(FILE *out) {
    fputs("usage: specd <command> [options]\n"
          "\n"
          "commands:\n"
          "  run      generate once with speculative decoding (specd run --help)\n"
          "  bench    compare with llama.cpp's speculative tools (specd bench --help)\n"
          "  serve    the JSON-RPC API over HTTP (specd serve --help)\n"
          "  version  print the version\n",
          out);
}

/* This program's own path, so the benchmark can run it as a child process. */
static const char *self_path(const char *argv0) {
    static char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return argv0;
    buf[n] = '\0';
    return buf;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "run") == 0) return cli_run(argc - 2, argv + 2);
    if (strcmp(cmd, "bench") == 0) return cli_bench(argc - 2, argv + 2, self_path(argv[0]));
    if (strcmp(cmd, "serve") == 0) return cli_serve(argc - 2, argv + 2);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        printf("specd %s\n", specd_version());
        return 0;
    }
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "specd: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
