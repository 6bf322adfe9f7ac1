/* lists.h - the comma-separated lists of -dev, -devd and --rpc (placement.c, rpc_servers.c). */
#ifndef SPECD_LISTS_H
#define SPECD_LISTS_H

#include "specd.h"

/* Devices one model may use, RPC servers one process may register. */
#define SPECD_MAX_DEVICES 16

/* Calls visit(item, user, error) for each comma-separated item of `list` (named `flag` in
 * messages), stopping at the first failure; an empty item is an error. */
specd_status specd_for_each_listed(const char *list, const char *flag,
                                   specd_status (*visit)(const char *item, void *user, char **error), void *user,
                                   char **error);

#endif
