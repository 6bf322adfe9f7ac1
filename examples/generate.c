/* generate.c - the smallest program on libspecd: load a target (and optionally a draft model),
 * generate greedily from a prompt, print the text and the speculative statistics.
 *
 *   cc generate.c $(pkg-config --cflags --libs specd) -o generate
 *   ./generate TARGET.gguf [DRAFT.gguf] "Once upon a time"
 */
#include <specd.h>

#include <stdio.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s TARGET.gguf [DRAFT.gguf] PROMPT\n", argv[0]);
        return 2;
    }
    /* A header and a library of another MAJOR.MINOR do not share an ABI. */
    if (specd_version_number() / 100 != SPECD_VERSION_NUMBER / 100) {
        fprintf(stderr, "libspecd %s does not match specd.h %s\n", specd_version(), SPECD_VERSION_STRING);
        return 1;
    }
    specd_engine_params ep = specd_engine_default_params();
    ep.target_path = argv[1];
    ep.draft_path = argc > 3 ? argv[2] : NULL;
    const char *prompt_text = argv[argc - 1];

    specd_engine *e = NULL;
    char *err = NULL;
    specd_token *prompt = NULL;
    int32_t n_prompt = 0;
    specd_result r = {0};
    int rc = 1;
    if (specd_engine_new(&ep, &e, &err) != SPECD_OK) goto done;
    if (specd_tokenize(e, prompt_text, true, &prompt, &n_prompt, &err) != SPECD_OK) goto done;

    specd_generation_params gp = specd_generation_default_params();
    gp.n_predict = 32;
    gp.ignore_eos = true;
    gp.sampling.temperature = 0; /* greedy: the very tokens the target alone would give */
    specd_status st = specd_generate(e, prompt, n_prompt, &gp, &r, &err);
    if (st != SPECD_OK) goto done;

    char *text = specd_detokenize(e, r.tokens, r.n_tokens);
    printf("%s\n", text ? text : "");
    specd_free(text);
    fprintf(stderr, "%d tokens, %d target passes, %d of %d drafts accepted, stop: %s\n", r.n_tokens,
            r.stats.n_steps, r.stats.n_accepted, r.stats.n_drafted, specd_stop_reason_name(r.stop_reason));
    rc = 0;
done:
    if (err) fprintf(stderr, "error: %s\n", err);
    specd_free(err);
    specd_result_clear(&r);
    specd_free(prompt);
    specd_engine_free(e);
    return rc;
}
