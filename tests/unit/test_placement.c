/* test_placement.c - the device flags (-ngl, -ngld, --device, --device-draft, --rpc) into
 * llama.cpp's model params, on a machine without a GPU: the CPU-only translation, the errors for
 * bad devices, and, with llama.cpp's RPC backend built in, the offload path on a real non-CPU
 * device: an RPC server started inside this process (ggml_backend_rpc_start_server on a thread,
 * serving this machine's CPU), which is exactly what llama.cpp's rpc-server does.
 *
 *   test_placement [MODELS_DIR]   (with it, also loads the tiny target through the RPC device)
 */
#define _POSIX_C_SOURCE 200809L
#include "engine/placement.h"
#include "engine/rpc_servers.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

static const char *models_dir;
static char rpc_endpoint[64]; /* "" until the in-process server runs */

static specd_engine_params params_with(const char *devices, const char *devices_draft, int32_t ngl, int32_t ngld) {
    specd_engine_params p = specd_engine_default_params();
    p.target_path = "unused.gguf";
    p.devices = devices;
    p.devices_draft = devices_draft;
    p.n_gpu_layers = ngl;
    p.n_gpu_layers_draft = ngld;
    return p;
}

/* The placement of (p, draft) applied to llama.cpp's default model params. */
static struct llama_model_params translate(const specd_engine_params *p, bool draft, specd_placement *pl) {
    char *error = NULL;
    assert_int_equal(specd_placement_of(p, draft, pl, &error), SPECD_OK);
    assert_null(error);
    struct llama_model_params mp = llama_model_default_params();
    specd_placement_apply(pl, &mp);
    return mp;
}

static char *placement_error(const specd_engine_params *p, bool draft) {
    specd_placement pl;
    char *error = NULL;
    assert_int_equal(specd_placement_of(p, draft, &pl, &error), SPECD_ERR_INVALID_ARGUMENT);
    assert_non_null(error);
    return error;
}

/* No GPU, no RPC server: whatever -ngl says, llama.cpp gets an empty device list (the CPU only,
 * never NULL, which would let it take every device there is) and no layers to offload. */
static void test_without_devices_everything_stays_on_the_cpu(void **state) {
    (void)state;
    if (specd_gpu_offload_available()) skip(); /* a GPU build on a GPU machine */
    const char *lists[] = {NULL, "", "none"};
    for (size_t i = 0; i < 3; i++) {
        specd_engine_params p = params_with(lists[i], lists[i], 99, -1);
        for (int draft = 0; draft < 2; draft++) {
            specd_placement pl;
            struct llama_model_params mp = translate(&p, draft, &pl);
            assert_non_null(mp.devices);
            assert_null(mp.devices[0]);
            assert_int_equal(mp.n_gpu_layers, 0);
            assert_string_equal(pl.names, "CPU");
        }
    }
    assert_non_null(specd_gpu_offload_note());
    assert_non_null(strstr(specd_gpu_offload_note(), "CPU"));
    char *error = NULL, *text = specd_devices_describe(NULL, &error);
    assert_non_null(text);
    assert_string_equal(text, "Available devices:\n  (none)\n"); /* llama.cpp's --list-devices */
    specd_free(text);
}

static void test_an_unknown_device_is_an_error_naming_it(void **state) {
    (void)state;
    specd_engine_params p = params_with("CUDA7", "Vulkan3", -1, -1);
    char *error = placement_error(&p, false);
    assert_non_null(strstr(error, "--device: unknown device 'CUDA7'"));
    assert_non_null(strstr(error, "the devices there are:"));
    specd_free(error);
    error = placement_error(&p, true);
    assert_non_null(strstr(error, "--device-draft: unknown device 'Vulkan3'"));
    specd_free(error);
    /* the CPU is where layers stay, not a device to offload to (as llama.cpp) */
    p = params_with("CPU", NULL, -1, -1);
    error = placement_error(&p, false);
    assert_non_null(strstr(error, "unknown device 'CPU'"));
    specd_free(error);
    p = params_with("none,,none", NULL, -1, -1);
    error = placement_error(&p, false);
    assert_non_null(strstr(error, "empty item"));
    specd_free(error);
    p = params_with(NULL, NULL, -2, -1);
    error = placement_error(&p, false);
    assert_non_null(strstr(error, "-ngl"));
    specd_free(error);
}

static void test_an_unreachable_rpc_server_is_an_error(void **state) {
    (void)state;
    char *error = NULL;
    assert_int_equal(specd_rpc_servers_add("127.0.0.1:1", &error), SPECD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(error, "127.0.0.1:1"));
    specd_free(error);
    assert_int_equal(specd_rpc_servers_add("no-port", &error), SPECD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(error, "HOST:PORT"));
    specd_free(error);
}

/* ---- with a real non-CPU device: an RPC server in this process ---------------------------------- */

typedef void (*start_server_fn)(const char *endpoint, const char *cache_dir, size_t n_threads, size_t n_devices,
                                ggml_backend_dev_t *devices);

static void *serve_rpc(void *arg) {
    start_server_fn start = (start_server_fn)arg;
    ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    start(rpc_endpoint, NULL, 1, 1, &cpu); /* serves until the process ends */
    return NULL;
}

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    bool ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0;
    close(fd);
    return ok ? ntohs(a.sin_port) : -1;
}

/* Starts the in-process server and registers it; false when llama.cpp has no RPC backend. */
static bool start_rpc_server(void) {
    if (rpc_endpoint[0]) return true;
    specd_gpu_offload_available(); /* initializes llama.cpp's backends */
    ggml_backend_reg_t reg = ggml_backend_reg_by_name("RPC");
    start_server_fn start = reg ? (start_server_fn)ggml_backend_reg_get_proc_address(reg, "ggml_backend_rpc_start_server")
                                : NULL;
    if (!start) return false;
    snprintf(rpc_endpoint, sizeof rpc_endpoint, "127.0.0.1:%d", free_port());
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, serve_rpc, (void *)start), 0);
    pthread_detach(t);
    char *error = NULL;
    for (int i = 0; i < 100; i++) { /* until it listens: at most 10 s */
        specd_free(error);
        error = NULL;
        if (specd_rpc_servers_add(rpc_endpoint, &error) == SPECD_OK) return true;
        nanosleep(&(struct timespec){.tv_nsec = 100 * 1000 * 1000}, NULL);
    }
    fail_msg("the in-process RPC server at %s did not answer: %s", rpc_endpoint, error);
    return false;
}

static void test_rpc_servers_take_the_target_and_the_draft_stays_local(void **state) {
    (void)state;
    if (!start_rpc_server()) {
        printf("skipped: this llama.cpp has no RPC backend (GGML_RPC=OFF)\n");
        skip();
    }
    size_t n_before = ggml_backend_dev_count();
    char *error = NULL;
    assert_int_equal(specd_rpc_servers_add(rpc_endpoint, &error), SPECD_OK); /* again: registered once */
    assert_int_equal(ggml_backend_dev_count(), n_before);
    assert_true(specd_gpu_offload_available());
    assert_null(specd_gpu_offload_note());

    specd_engine_params p = params_with(NULL, NULL, -1, -1);
    p.rpc_servers = rpc_endpoint;
    specd_placement pl;
    struct llama_model_params mp = translate(&p, false, &pl);
    assert_non_null(mp.devices[0]);
    assert_null(mp.devices[1]);
    assert_string_equal(ggml_backend_dev_description(mp.devices[0]), rpc_endpoint);
    assert_int_equal(mp.n_gpu_layers, -1);
    const char *rpc_name = ggml_backend_dev_name(mp.devices[0]);
    assert_string_equal(pl.names, rpc_name);

    p.n_gpu_layers = 5;
    mp = translate(&p, false, &pl);
    assert_int_equal(mp.n_gpu_layers, 5);

    /* the draft never takes an RPC server by default... */
    mp = translate(&p, true, &pl);
    assert_null(mp.devices[0]);
    assert_int_equal(mp.n_gpu_layers, 0);
    /* ...but may be put there by name, on another device than the target */
    specd_engine_params named = params_with("none", rpc_name, -1, 3);
    mp = translate(&named, true, &pl);
    assert_ptr_equal(mp.devices[0], ggml_backend_dev_by_name(rpc_name));
    assert_int_equal(mp.n_gpu_layers, 3);
    mp = translate(&named, false, &pl);
    assert_null(mp.devices[0]);

    /* an engine without --rpc does not use servers another engine of the process registered */
    specd_engine_params local = params_with(NULL, NULL, -1, -1);
    mp = translate(&local, false, &pl);
    assert_null(mp.devices[0]);

    char *text = specd_devices_describe(NULL, &error);
    assert_non_null(text);
    char line[128];
    snprintf(line, sizeof line, "  %s: %s (", rpc_name, rpc_endpoint);
    assert_non_null(strstr(text, line));
    specd_free(text);
}

/* The whole way: an engine on the tiny target with every layer on the RPC device, reporting it. */
static void test_an_engine_reports_its_placement(void **state) {
    (void)state;
    if (!models_dir || !start_rpc_server()) skip();
    char target[512], draft[512];
    snprintf(target, sizeof target, "%s/target.gguf", models_dir);
    snprintf(draft, sizeof draft, "%s/draft.gguf", models_dir);
    specd_engine_params p = specd_engine_default_params();
    p.target_path = target;
    p.draft_path = draft;
    p.n_ctx = 128;
    p.n_threads = 1;
    p.rpc_servers = rpc_endpoint;
    specd_engine *e = NULL;
    char *error = NULL;
    assert_int_equal(specd_engine_new(&p, &e, &error), SPECD_OK);
    specd_placement_info t = specd_engine_placement(e, false), d = specd_engine_placement(e, true);
    assert_true(t.n_layers > 0);
    assert_int_equal(t.n_layers_offloaded, t.n_layers + 1);
    assert_non_null(strstr(t.devices, "RPC"));
    assert_string_equal(d.devices, "CPU");
    assert_int_equal(d.n_layers_offloaded, 0);
    specd_engine_free(e);

    /* the calibration cache keeps one file per placement: costs on the RPC device are not the CPU's */
    char dir[] = "/tmp/specd-placement-XXXXXX";
    assert_non_null(mkdtemp(dir));
    p.calibration_cache = dir;
    assert_int_equal(specd_engine_new(&p, &e, &error), SPECD_OK);
    char remote_file[1024];
    snprintf(remote_file, sizeof remote_file, "%s", specd_engine_calibration(e).path);
    specd_engine_free(e);
    specd_engine_params cpu = p;
    cpu.rpc_servers = NULL;
    assert_int_equal(specd_engine_new(&cpu, &e, &error), SPECD_OK);
    assert_string_equal(specd_engine_placement(e, false).devices, "CPU");
    assert_string_not_equal(specd_engine_calibration(e).path, remote_file);
    specd_engine_free(e);
    rmdir(dir);
    p.calibration_cache = NULL;

    p.devices = "Metal0";
    specd_engine_input failed = SPECD_INPUT_NONE;
    p.failed_input = &failed;
    assert_int_equal(specd_engine_new(&p, &e, &error), SPECD_ERR_INVALID_ARGUMENT);
    assert_int_equal(failed, SPECD_INPUT_TARGET);
    assert_non_null(strstr(error, "unknown device 'Metal0'"));
    assert_non_null(strstr(error, rpc_endpoint)); /* the devices there are */
    specd_free(error);
}

int main(int argc, char **argv) {
    models_dir = argc > 1 ? argv[1] : NULL;
    const struct CMUnitTest tests[] = {
        /* before any RPC server is registered: they are for the whole process */
        cmocka_unit_test(test_without_devices_everything_stays_on_the_cpu),
        cmocka_unit_test(test_an_unknown_device_is_an_error_naming_it),
        cmocka_unit_test(test_an_unreachable_rpc_server_is_an_error),
        cmocka_unit_test(test_rpc_servers_take_the_target_and_the_draft_stays_local),
        cmocka_unit_test(test_an_engine_reports_its_placement),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
