/* test_flag_names: llama.cpp's command-line spellings of the engine settings (src/util/flag_names.c),
 * which specd run and JSON-RPC init read; and that they agree with the names the library gives. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "util/flag_names.h"

/* --pooling: llama-server's names, each read back into its own value; anything else refused. */
static void test_pooling_round_trip(void **state) {
    (void)state;
    for (int i = SPECD_POOLING_NONE; i <= SPECD_POOLING_RANK; i++) {
        specd_pooling parsed = SPECD_POOLING_DEFAULT;
        assert_true(specd_pooling_parse(specd_pooling_name((specd_pooling)i), &parsed));
        assert_int_equal(parsed, i);
    }
    specd_pooling parsed = SPECD_POOLING_MEAN;
    assert_true(specd_pooling_parse("last", &parsed) && parsed == SPECD_POOLING_LAST);
    assert_false(specd_pooling_parse("median", &parsed));
    assert_false(specd_pooling_parse("default", &parsed));
    assert_false(specd_pooling_parse(NULL, &parsed));
    assert_int_equal(parsed, SPECD_POOLING_LAST);
}

static void test_flash_attn_values(void **state) {
    (void)state;
    specd_flash_attn fa = SPECD_FLASH_ATTN_OFF;
    assert_true(specd_flash_attn_parse("on", &fa) && fa == SPECD_FLASH_ATTN_ON);
    assert_true(specd_flash_attn_parse("auto", &fa) && fa == SPECD_FLASH_ATTN_AUTO);
    assert_true(specd_flash_attn_parse("off", &fa) && fa == SPECD_FLASH_ATTN_OFF);
    assert_false(specd_flash_attn_parse("yes", &fa) || specd_flash_attn_parse(NULL, &fa));
}

/* Every type the library names parses back to itself, and only llama.cpp's spellings parse. */
static void test_cache_types_round_trip(void **state) {
    (void)state;
    specd_cache_type t = SPECD_CACHE_TYPE_DEFAULT;
    for (int v = SPECD_CACHE_TYPE_F16; v <= SPECD_CACHE_TYPE_Q5_1; v++) {
        const char *name = specd_cache_type_name((specd_cache_type)v);
        assert_non_null(name);
        assert_true(specd_cache_type_parse(name, &t));
        assert_int_equal(t, v);
    }
    assert_true(specd_cache_type_parse("iq4_nl", &t) && t == SPECD_CACHE_TYPE_IQ4_NL);
    assert_false(specd_cache_type_parse("q8", &t) || specd_cache_type_parse("F16", &t) ||
                 specd_cache_type_parse("default", &t) || specd_cache_type_parse(NULL, &t));
}

static void test_load_modes_in_llama_cpp_order(void **state) {
    (void)state;
    specd_load_mode mode = SPECD_LOAD_MODE_AUTO;
    const char *names[] = {"auto", "none", "mmap", "mlock", "mmap+mlock", "dio"};
    for (int i = 0; i < 6; i++) {
        assert_true(specd_load_mode_parse(names[i], &mode));
        assert_int_equal(mode, i);
    }
    assert_false(specd_load_mode_parse("mmap,mlock", &mode));
    assert_false(specd_load_mode_parse(NULL, &mode));
}

static void test_draft_hold_values(void **state) {
    (void)state;
    specd_draft_hold hold = SPECD_DRAFT_HOLD_OFF;
    const char *holds[] = {"auto", "on", "off"};
    for (int i = 0; i < 3; i++) {
        assert_true(specd_draft_hold_parse(holds[i], &hold));
        assert_int_equal(hold, i);
    }
    assert_false(specd_draft_hold_parse("yes", &hold));
    assert_false(specd_draft_hold_parse(NULL, &hold));
}

static void test_gpu_layers_values_as_llama_cpp(void **state) {
    (void)state;
    int32_t v = 7;
    assert_true(specd_gpu_layers_parse("all", &v));
    assert_int_equal(v, -1);
    assert_true(specd_gpu_layers_parse("auto", &v));
    assert_int_equal(v, -1);
    assert_true(specd_gpu_layers_parse("99", &v));
    assert_int_equal(v, 99);
    assert_true(specd_gpu_layers_parse("0", &v));
    assert_int_equal(v, 0);
    assert_false(specd_gpu_layers_parse("-2", &v));
    assert_false(specd_gpu_layers_parse("12x", &v));
    assert_false(specd_gpu_layers_parse("", &v));
    assert_false(specd_gpu_layers_parse(NULL, &v));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pooling_round_trip),
        cmocka_unit_test(test_flash_attn_values),
        cmocka_unit_test(test_cache_types_round_trip),
        cmocka_unit_test(test_load_modes_in_llama_cpp_order),
        cmocka_unit_test(test_draft_hold_values),
        cmocka_unit_test(test_gpu_layers_values_as_llama_cpp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
