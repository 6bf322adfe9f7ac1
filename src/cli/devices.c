/* devices.c - --list-devices of specd run and specd serve: llama.cpp's devices, as specd names them. */
#include "cli.h"

int cli_list_devices(const char *rpc_servers) {
    char *error = NULL;
    char *text = specd_devices_describe(rpc_servers, &error);
    if (!text) {
        fprintf(stderr, "specd: error: %s\n", error ? error : "cannot list the devices");
        specd_free(error);
        return CLI_EXIT_USAGE;
    }
    fputs(text, stdout);
    specd_free(text);
    return 0;
}
