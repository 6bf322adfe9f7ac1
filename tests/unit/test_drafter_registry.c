/* test_drafter_registry.c - the one table of drafter kinds (src/draft/drafter_registry.h) and the
 * names read from it: every row's name and llama-server's spelling parse to its type and back, no
 * name means two kinds, llama-server's --spec-type names (the pinned common/speculative.cpp's list)
 * are all taken, an unknown name's error lists every drafter, and each row's needs and
 * constructor are filled in. No engine is loaded. */
#include "specd.h"

#include "draft/drafter_registry.h"
#include "draft/spec_types.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

static void test_each_row_names_its_type_both_ways(void **state) {
    (void)state;
    int32_t n = 0;
    const specd_drafter_kind *kinds = specd_drafter_kinds(&n);
    assert_true(n >= 11);
    for (int32_t i = 0; i < n; i++) {
        const specd_drafter_kind *k = &kinds[i];
        specd_spec_type t = SPECD_SPEC_NONE;
        assert_int_equal(k->type, SPECD_SPEC_DRAFT + i); /* rows in specd_spec_type order */
        assert_ptr_equal(specd_drafter_kind_of(k->type), k);
        assert_string_equal(specd_spec_type_name(k->type), k->name);
        assert_true(specd_spec_type_from_name(k->name, &t));
        assert_int_equal(t, k->type);
        if (k->llama_name) { /* an alias maps to the same kind */
            t = SPECD_SPEC_NONE;
            assert_true(specd_spec_type_from_name(k->llama_name, &t));
            assert_int_equal(t, k->type);
            assert_ptr_equal(specd_drafter_kind_named(k->llama_name), k);
        }
    }
    assert_null(specd_drafter_kind_of(SPECD_SPEC_AUTO));
    assert_null(specd_drafter_kind_of(SPECD_SPEC_NONE));
    assert_null(specd_drafter_kind_of((specd_spec_type)(SPECD_SPEC_DRAFT + n)));
}

static void test_no_name_means_two_kinds(void **state) {
    (void)state;
    int32_t n = 0;
    const specd_drafter_kind *kinds = specd_drafter_kinds(&n);
    for (int32_t i = 0; i < n; i++) {
        const char *mine[2] = {kinds[i].name, kinds[i].llama_name};
        for (int32_t j = 0; j < n; j++) {
            if (j == i) continue;
            for (int m = 0; m < 2; m++) {
                if (!mine[m]) continue;
                assert_string_not_equal(mine[m], kinds[j].name);
                if (kinds[j].llama_name) assert_string_not_equal(mine[m], kinds[j].llama_name);
            }
        }
        assert_string_not_equal(kinds[i].name, "none");
        assert_string_not_equal(kinds[i].name, "auto");
    }
}

/* The pinned llama.cpp's --spec-type names (common/speculative.cpp) and what each is here. */
static void test_llama_server_names_parse(void **state) {
    (void)state;
    static const struct {
        const char *name;
        specd_spec_type type;
    } llama[] = {{"none", SPECD_SPEC_NONE},
                 {"draft-simple", SPECD_SPEC_DRAFT},
                 {"draft-eagle3", SPECD_SPEC_EAGLE3},
                 {"draft-mtp", SPECD_SPEC_MTP},
                 {"draft-dflash", SPECD_SPEC_DFLASH},
                 {"draft-dspark", SPECD_SPEC_DSPARK},
                 {"ngram-simple", SPECD_SPEC_NGRAM_SIMPLE},
                 {"ngram-map-k", SPECD_SPEC_NGRAM_MAP},
                 {"ngram-map-k4v", SPECD_SPEC_NGRAM_MAP_K4V},
                 {"ngram-mod", SPECD_SPEC_NGRAM_MOD},
                 {"ngram-cache", SPECD_SPEC_NGRAM_CACHE}};
    for (size_t i = 0; i < sizeof llama / sizeof *llama; i++) {
        specd_spec_type t = SPECD_SPEC_AUTO;
        assert_true(specd_spec_type_from_name(llama[i].name, &t));
        assert_int_equal(t, llama[i].type);
    }
    specd_spec_params sp = specd_generation_default_params().speculative;
    char *err = NULL;
    assert_int_equal(specd_spec_params_parse_types(&sp, "ngram-mod,draft-simple,ngram-map-k", &err), SPECD_OK);
    assert_int_equal(sp.n_types, 3);
    assert_int_equal(sp.types[0], SPECD_SPEC_NGRAM_MOD);
    assert_int_equal(sp.types[1], SPECD_SPEC_DRAFT);
    assert_int_equal(sp.types[2], SPECD_SPEC_NGRAM_MAP);
}

/* An unknown name is refused naming it, and the message lists every drafter of the table. */
static void test_unknown_name_lists_the_registry(void **state) {
    (void)state;
    specd_spec_params sp = specd_generation_default_params().speculative;
    char *err = NULL;
    specd_spec_type t;
    assert_false(specd_spec_type_from_name("draft-medusa", &t));
    assert_false(specd_spec_type_from_name(NULL, &t));
    assert_int_equal(specd_spec_params_parse_types(&sp, "ngram-simple,draft-medusa", &err), SPECD_ERR_INVALID_ARGUMENT);
    assert_non_null(err);
    assert_non_null(strstr(err, "'draft-medusa'"));
    int32_t n = 0;
    const specd_drafter_kind *kinds = specd_drafter_kinds(&n);
    const char *names = specd_spec_type_names();
    assert_true(strncmp(names, "none, ", 6) == 0);
    for (int32_t i = 0; i < n; i++) {
        char quoted[64];
        snprintf(quoted, sizeof quoted, " %s,", kinds[i].name);
        char listed[320];
        snprintf(listed, sizeof listed, "%s,", err); /* each name followed by "," or the end */
        assert_non_null(strstr(listed, quoted));
        snprintf(listed, sizeof listed, "%s,", names);
        assert_non_null(strstr(listed, quoted));
    }
    specd_free(err);
}

/* Each row says what it needs, with a requirement to refuse by where it needs something. */
static void test_needs_and_constructors_are_filled_in(void **state) {
    (void)state;
    int32_t n = 0;
    const specd_drafter_kind *kinds = specd_drafter_kinds(&n);
    for (int32_t i = 0; i < n; i++) {
        const specd_drafter_kind *k = &kinds[i];
        assert_non_null(k->create);
        assert_non_null(k->help);
        assert_true((k->requirement != NULL) == (k->needs != SPECD_SPEC_NEEDS_NOTHING));
        bool head = k->needs == SPECD_SPEC_NEEDS_TARGET_NEXTN || k->needs == SPECD_SPEC_NEEDS_HEAD_FILE;
        assert_true(head == (k->head != SPECD_HEAD_NONE));
        assert_true(head == specd_spec_type_is_head(k->type));
        assert_true(specd_drafter_kind_decodes(k) == (k->needs != SPECD_SPEC_NEEDS_NOTHING));
    }
    assert_int_equal(specd_drafter_kind_of(SPECD_SPEC_DRAFT)->needs, SPECD_SPEC_NEEDS_DRAFT_MODEL);
    assert_int_equal(specd_drafter_kind_of(SPECD_SPEC_MTP)->needs, SPECD_SPEC_NEEDS_TARGET_NEXTN);
    assert_int_equal(specd_drafter_kind_of(SPECD_SPEC_EAGLE3)->head, SPECD_HEAD_EAGLE3);
    assert_int_equal(specd_drafter_kind_of(SPECD_SPEC_DSPARK)->head, SPECD_HEAD_DSPARK);
    assert_int_equal(specd_drafter_kind_of(SPECD_SPEC_SUFFIX)->needs, SPECD_SPEC_NEEDS_NOTHING);
}

/* What a request's list needs: the CLI, serve and the init flags ask the table. */
static void test_a_list_names_what_it_needs(void **state) {
    (void)state;
    specd_spec_params sp = specd_generation_default_params().speculative;
    char *err = NULL;
    assert_true(specd_spec_names_need(&sp, SPECD_SPEC_NEEDS_DRAFT_MODEL, true)); /* auto */
    assert_false(specd_spec_names_need(&sp, SPECD_SPEC_NEEDS_DRAFT_MODEL, false));
    assert_int_equal(specd_spec_params_parse_types(&sp, "ngram-simple,draft-mtp", &err), SPECD_OK);
    assert_true(specd_spec_names_need(&sp, SPECD_SPEC_NEEDS_TARGET_NEXTN, false));
    assert_false(specd_spec_names_need(&sp, SPECD_SPEC_NEEDS_DRAFT_MODEL, true));
    assert_false(specd_spec_names_need(&sp, SPECD_SPEC_NEEDS_HEAD_FILE, false));
    assert_int_equal(specd_spec_params_parse_types(&sp, "draft-simple", &err), SPECD_OK);
    assert_true(specd_spec_names_need(&sp, SPECD_SPEC_NEEDS_DRAFT_MODEL, false));
    /* the public face of the same column (libspecd-rpc's layers read it) */
    assert_true(specd_spec_params_need(&sp, SPECD_SPEC_NEEDS_DRAFT_MODEL));
    assert_false(specd_spec_params_need(NULL, SPECD_SPEC_NEEDS_DRAFT_MODEL));
    assert_int_equal(specd_spec_type_needs(SPECD_SPEC_DFLASH), SPECD_SPEC_NEEDS_HEAD_FILE);
    assert_int_equal(specd_spec_type_needs(SPECD_SPEC_NONE), SPECD_SPEC_NEEDS_NOTHING);
    assert_int_equal(specd_spec_type_needs((specd_spec_type)42), SPECD_SPEC_NEEDS_NOTHING);
}

/* A kind that keeps state across requests, built without the engine's memory, and a type no row
 * has: refused with a message, nothing built. */
static void test_create_refuses_what_it_cannot_build(void **state) {
    (void)state;
    specd_spec_params sp = specd_generation_default_params().speculative;
    specd_drafter_env env = {NULL, NULL, &sp};
    specd_drafter d = {0};
    char *err = NULL;
    assert_int_equal(specd_drafter_create(&env, SPECD_SPEC_SUFFIX, &d, &err), SPECD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "suffix drafter needs the engine's drafter memory"));
    assert_null(d.ops);
    specd_free(err);
    err = NULL;
    assert_int_equal(specd_drafter_create(&env, (specd_spec_type)42, &d, &err), SPECD_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err, "42"));
    specd_free(err);
    err = NULL;
    assert_int_equal(specd_drafter_create(&env, SPECD_SPEC_NGRAM_SIMPLE, &d, &err), SPECD_OK);
    assert_non_null(d.ops);
    d.ops->destroy(d.self);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_row_names_its_type_both_ways),
        cmocka_unit_test(test_no_name_means_two_kinds),
        cmocka_unit_test(test_llama_server_names_parse),
        cmocka_unit_test(test_unknown_name_lists_the_registry),
        cmocka_unit_test(test_needs_and_constructors_are_filled_in),
        cmocka_unit_test(test_a_list_names_what_it_needs),
        cmocka_unit_test(test_create_refuses_what_it_cannot_build),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
