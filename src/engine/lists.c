/* lists.c - see lists.h. */
#define _DEFAULT_SOURCE /* strsep */
#include "lists.h"

#include "../util/util.h"

#include <stdlib.h>
#include <string.h>

specd_status specd_for_each_listed(const char *list, const char *flag,
                                  specd_status (*visit)(const char *item, void *user, char **error), void *user,
                                  char **error) {
    size_t n = strlen(list);
    if (n == 0 || list[0] == ',' || list[n - 1] == ',' || strstr(list, ",,")) {
        specd_set_error(error, "%s '%s' has an empty item: give names separated by single commas", flag, list);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    char *copy = strdup(list);
    if (!copy) {
        specd_set_error(error, "out of memory for %s", flag);
        return SPECD_ERR_NO_MEMORY;
    }
    specd_status st = SPECD_OK;
    char *rest = copy;
    for (char *item; st == SPECD_OK && (item = strsep(&rest, ",")) != NULL;) st = visit(item, user, error);
    free(copy);
    return st;
}
