/* placement.c - where each model's layers go. llama.cpp's flags (-ngl, --device, --rpc) become a
 * device list and a layer count in llama_model_params; the same list names the placement in the
 * report and in the calibration cache's key (a pass costs differently on a GPU). */
#define _DEFAULT_SOURCE /* strsep */
#include "placement.h"

#include "engine_internal.h"
#include "lists.h"
#include "llama_log.h"
#include "rpc_servers.h"

#include "../util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024 * 1024)

static bool is_rpc_device(ggml_backend_dev_t dev) {
    ggml_backend_reg_t rpc = ggml_backend_reg_by_name("RPC");
    return rpc && ggml_backend_dev_backend_reg(dev) == rpc;
}

static bool is_gpu_device(ggml_backend_dev_t dev) {
    enum ggml_backend_dev_type t = ggml_backend_dev_type(dev);
    return t == GGML_BACKEND_DEVICE_TYPE_GPU || t == GGML_BACKEND_DEVICE_TYPE_IGPU;
}

bool specd_gpu_offload_available(void) {
    specd_llama_init();
    for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
        ggml_backend_dev_t dev = ggml_backend_dev_get(i);
        if (is_gpu_device(dev) || is_rpc_device(dev)) return true;
    }
    return false;
}

const char *specd_gpu_offload_note(void) {
    if (specd_gpu_offload_available()) return NULL;
    return "this llama.cpp has no GPU backend (a CPU-only build) and no --rpc server was given: the layers "
           "stay on the CPU (make GPU=cuda or make GPU=vulkan builds specd with a GPU backend)";
}

/* Whether `dev` is an RPC device of one of the servers in `servers` (its description is the
 * server's endpoint). */
static bool served_by(ggml_backend_dev_t dev, const char *servers) {
    if (!servers || !is_rpc_device(dev)) return false;
    const char *endpoint = ggml_backend_dev_description(dev);
    size_t n = strlen(endpoint);
    for (const char *p = servers; (p = strstr(p, endpoint)) != NULL; p += n)
        if ((p == servers || p[-1] == ',') && (p[n] == '\0' || p[n] == ',')) return true;
    return false;
}

/* ---- device lists ----------------------------------------------------------------------------- */

/* "  NAME: DESCRIPTION (TOTAL MiB, FREE MiB free)" lines of the non-CPU devices into buf, as
 * llama.cpp's --list-devices prints them. */
static void describe_devices(char *buf, size_t size, const char *indent) {
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < ggml_backend_dev_count() && len < size; i++) {
        ggml_backend_dev_t dev = ggml_backend_dev_get(i);
        if (ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_CPU) continue;
        size_t free_mem = 0, total = 0;
        ggml_backend_dev_memory(dev, &free_mem, &total);
        int n = snprintf(buf + len, size - len, "%s%s: %s (%zu MiB, %zu MiB free)\n", indent,
                         ggml_backend_dev_name(dev), ggml_backend_dev_description(dev), total / MIB, free_mem / MIB);
        if (n > 0) len += (size_t)n;
    }
    if (len == 0) snprintf(buf, size, "%s(none)\n", indent);
}

char *specd_devices_describe(const char *rpc_servers, char **error) {
    if (error) *error = NULL;
    specd_llama_init();
    if (specd_rpc_servers_add(rpc_servers, error) != SPECD_OK) return NULL;
    char lines[4096];
    describe_devices(lines, sizeof lines, "  ");
    size_t n = strlen("Available devices:\n") + strlen(lines) + 1;
    char *text = malloc(n);
    if (text) snprintf(text, n, "Available devices:\n%s", lines);
    else specd_set_error(error, "out of memory listing the devices");
    return text;
}

typedef struct device_list {
    specd_placement *placement;
    const char *flag;
} device_list;

static specd_status add_device(specd_placement *pl, ggml_backend_dev_t dev, const char *flag, char **error) {
    if (pl->n_devices == SPECD_MAX_DEVICES) {
        specd_set_error(error, "%s: at most %d devices", flag, SPECD_MAX_DEVICES);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    pl->devices[pl->n_devices++] = dev;
    pl->devices[pl->n_devices] = NULL;
    return SPECD_OK;
}

static specd_status visit_device_name(const char *name, void *user, char **error) {
    device_list *dl = user;
    ggml_backend_dev_t dev = ggml_backend_dev_by_name(name);
    /* As llama.cpp: the CPU is where layers go when not offloaded, never an offload device. */
    if (!dev || ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_CPU) {
        char lines[2048];
        describe_devices(lines, sizeof lines, " ");
        size_t n = strlen(lines);
        if (n && lines[n - 1] == '\n') lines[n - 1] = '\0';
        for (char *p = lines; (p = strchr(p, '\n')) != NULL;) *p = ';';
        specd_set_error(error, "%s: unknown device '%s'; the devices there are:%s (\"none\": the CPU only; "
                        "see --list-devices)", dl->flag, name, lines);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    return add_device(dl->placement, dev, dl->flag, error);
}

/* The default devices: every GPU (iGPUs only when there is no discrete one, as llama.cpp does)
 * and, for the target, the devices of its RPC servers. */
static specd_status default_devices(const specd_engine_params *p, bool draft, specd_placement *pl, char **error) {
    bool has_gpu = false;
    for (size_t i = 0; i < ggml_backend_dev_count(); i++)
        has_gpu |= ggml_backend_dev_type(ggml_backend_dev_get(i)) == GGML_BACKEND_DEVICE_TYPE_GPU;
    specd_status st = SPECD_OK;
    for (size_t i = 0; st == SPECD_OK && i < ggml_backend_dev_count(); i++) {
        ggml_backend_dev_t dev = ggml_backend_dev_get(i);
        enum ggml_backend_dev_type t = ggml_backend_dev_type(dev);
        bool local = t == GGML_BACKEND_DEVICE_TYPE_GPU || (t == GGML_BACKEND_DEVICE_TYPE_IGPU && !has_gpu);
        if ((local && !is_rpc_device(dev)) || (!draft && served_by(dev, p->rpc_servers)))
            st = add_device(pl, dev, draft ? "--device-draft" : "--device", error);
    }
    return st;
}

static void name_devices(specd_placement *pl) {
    size_t len = 0;
    snprintf(pl->names, sizeof pl->names, "CPU");
    for (int32_t i = 0; i < pl->n_devices && len < sizeof pl->names; i++) {
        int n = snprintf(pl->names + len, sizeof pl->names - len, "%s%s", i ? "," : "",
                         ggml_backend_dev_name(pl->devices[i]));
        if (n > 0) len += (size_t)n;
    }
}

specd_status specd_placement_of(const specd_engine_params *p, bool draft, specd_placement *out, char **error) {
    memset(out, 0, sizeof *out);
    const char *names = draft ? p->devices_draft : p->devices;
    int32_t n_gpu_layers = draft ? p->n_gpu_layers_draft : p->n_gpu_layers;
    if (n_gpu_layers < -1) {
        specd_set_error(error, "%s must be -1 (all), 0 (none) or a layer count (got %d)",
                        draft ? "n_gpu_layers_draft (-ngld)" : "n_gpu_layers (-ngl)", n_gpu_layers);
        return SPECD_ERR_INVALID_ARGUMENT;
    }
    specd_status st = SPECD_OK;
    if (!names || !*names) {
        st = default_devices(p, draft, out, error);
    } else if (strcmp(names, "none") != 0) {
        device_list dl = {out, draft ? "--device-draft" : "--device"};
        st = specd_for_each_listed(names, dl.flag, visit_device_name, &dl, error);
    }
    if (st != SPECD_OK) return st;
    out->n_gpu_layers = out->n_devices > 0 ? n_gpu_layers : 0;
    name_devices(out);
    if (out->n_gpu_layers == 0) snprintf(out->names, sizeof out->names, "CPU");
    return SPECD_OK;
}

void specd_placement_apply(const specd_placement *pl, struct llama_model_params *mp) {
    /* Always an explicit list (an empty one is the CPU only): NULL would let llama.cpp take every
     * device, RPC servers of another engine in this process included. */
    mp->devices = (ggml_backend_dev_t *)pl->devices;
    mp->n_gpu_layers = pl->n_gpu_layers;
}

void specd_placement_loaded(specd_placement *pl, const struct llama_model *model) {
    pl->n_layers = llama_model_n_layer(model);
    int32_t all = pl->n_layers + 1;
    pl->n_layers_offloaded = pl->n_gpu_layers < 0 || pl->n_gpu_layers > all ? all : pl->n_gpu_layers;
}

bool specd_placement_only_rpc(const specd_placement *pl) {
    for (int32_t i = 0; i < pl->n_devices; i++)
        if (!is_rpc_device(pl->devices[i])) return false;
    return pl->n_devices > 0;
}

void specd_placement_key(const specd_placement *pl, char *out, size_t size) {
    snprintf(out, size, "%s:%d/%d", pl->names, pl->n_layers_offloaded, pl->n_layers + 1);
}
