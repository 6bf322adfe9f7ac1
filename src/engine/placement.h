/* placement.h - where each model's layers go: llama.cpp's devices (GPUs, RPC servers) chosen by
 * the flags llama.cpp names -ngl, -ngld, --device, --device-draft and --rpc, turned into
 * llama_model_params, and described for the report and the calibration cache's key. */
#ifndef SPECD_PLACEMENT_H
#define SPECD_PLACEMENT_H

#include "ggml-backend.h"
#include "llama.h"
#include "specd.h"

#include "lists.h"

/* One model's placement. `devices` is NULL-terminated and lives as long as the struct: llama.cpp
 * copies the list at load, so it must only outlive llama_model_load_from_file. */
typedef struct specd_placement {
    ggml_backend_dev_t devices[SPECD_MAX_DEVICES + 1];
    int32_t n_devices;
    int32_t n_gpu_layers; /* as given to llama.cpp: 0 when there is no device */
    /* "CPU", or the devices' names joined by ',' (filled by specd_placement_describe) */
    char names[256];
    int32_t n_layers;           /* the model's layers, once loaded */
    int32_t n_layers_offloaded; /* of n_layers + 1 (the output layer counts, as in llama.cpp) */
} specd_placement;

/* The placement of the target (draft false) or the draft from the engine's params: the devices
 * named (an unknown name is an error listing those there are), or by default every GPU, and for
 * the target the RPC servers of params->rpc_servers (the draft stays local). RPC servers must be
 * registered first (specd_rpc_servers_add). */
specd_status specd_placement_of(const specd_engine_params *params, bool draft, specd_placement *out, char **error);

/* Writes the placement into llama.cpp's model params: the device list and n_gpu_layers. */
void specd_placement_apply(const specd_placement *placement, struct llama_model_params *mp);

/* Once the model is loaded: its layer count and how many of them the placement offloads. */
void specd_placement_loaded(specd_placement *placement, const struct llama_model *model);

/* Whether the placement offloads to llama.cpp's rpc-servers alone (no local GPU among its devices):
 * what device runs behind a server is not known here. */
bool specd_placement_only_rpc(const specd_placement *placement);

/* "CUDA0:33/33" or "CPU": the part of the calibration key one model's placement gives. */
void specd_placement_key(const specd_placement *placement, char *out, size_t size);

#endif
