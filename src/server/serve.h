/* serve.h - `specd serve`, the program's HTTP server (src/server), called by src/cli/main.c. */
#ifndef SPECD_SERVE_H
#define SPECD_SERVE_H

/* Parses the serve options in argv, loads the models, serves until SIGINT/SIGTERM; returns the
 * exit code (CLI_EXIT_* in util/args.h). */
int cli_serve(int argc, char **argv);

#endif
