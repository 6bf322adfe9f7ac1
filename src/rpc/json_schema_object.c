/* json_schema_object.c - object schemas as GBNF: the declared properties in their declared order,
 * every required one present, each optional one present or not, and (with additionalProperties
 * true or a schema) further keys after them that are none of the declared names.
 *
 * The items (properties, then the extra keys) are written with one rule per item, so the grammar
 * stays linear in the number of properties:
 *   rest-i: what may follow once something was written, from item i on: each required item as
 *           "," kv, each optional one as ( "," kv )?, the extra keys as ( "," kv )*.
 * The object is "{" ws first ws "}" with first ::= kv_0 rest-1 | kv_1 rest-2 | ...: the first
 * item written is one of those up to the first required one (first is optional when none is).
 * A run of optional items makes a chain of rest rules that llama.cpp's left-recursion check
 * follows recursively, one stack frame per item: hence at most JS_MAX_PROPERTIES per object. */
#include "json_schema_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct obj_item {
    const char *kv; /* rule: key ws ":" ws value */
    bool required;
    bool repeated; /* the extra keys of additionalProperties */
} obj_item;

typedef struct obj_rules {
    obj_item *items;
    size_t n;
    const char **rest; /* rest[i], i in 1..n-1 */
} obj_rules;

/* ---- keys that are none of the declared names: a trie of their characters ----------------------
 * At each node: a declared name's next character (and on down the trie), or any other character
 * followed by anything (the key left the trie), or the closing quote where no declared name ends. */

typedef struct trie_node {
    uint32_t cp;
    int child, sibling;
    bool terminal;
} trie_node;

typedef struct trie {
    trie_node *nodes;
    size_t n, cap;
} trie;

static int trie_new_node(trie *t, uint32_t cp) {
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 32;
        trie_node *nodes = realloc(t->nodes, cap * sizeof *nodes);
        if (!nodes) return -1;
        t->nodes = nodes;
        t->cap = cap;
    }
    t->nodes[t->n] = (trie_node){cp, -1, -1, false};
    return (int)t->n++;
}

/* Next code point of valid UTF-8 (jansson checks keys). */
static uint32_t next_cp(const unsigned char **p) {
    const unsigned char *s = *p;
    uint32_t cp;
    int extra;
    if (s[0] < 0x80) cp = s[0], extra = 0;
    else if (s[0] < 0xE0) cp = s[0] & 0x1F, extra = 1;
    else if (s[0] < 0xF0) cp = s[0] & 0x0F, extra = 2;
    else cp = s[0] & 0x07, extra = 3;
    s++;
    for (int i = 0; i < extra && (*s & 0xC0) == 0x80; i++) cp = (cp << 6) | (*s++ & 0x3F);
    *p = s;
    return cp;
}

static bool trie_insert(trie *t, const char *name) {
    int node = 0;
    for (const unsigned char *p = (const unsigned char *)name; *p;) {
        uint32_t cp = next_cp(&p);
        int child = t->nodes[node].child;
        while (child >= 0 && t->nodes[child].cp != cp) child = t->nodes[child].sibling;
        if (child < 0) {
            child = trie_new_node(t, cp);
            if (child < 0) return false;
            t->nodes[child].sibling = t->nodes[node].child;
            t->nodes[node].child = child;
        }
        node = child;
    }
    t->nodes[node].terminal = true;
    return true;
}

static void append_cp_literal(js_buf *b, uint32_t cp) {
    js_buf one = {0};
    js_buf_utf8(&one, cp);
    if (one.oom) b->oom = true;
    else js_buf_literal(b, one.data, one.len);
    js_buf_free(&one);
}

static void emit_rest(js_conv *c, js_buf *b, const trie *t, int node, int depth, const char *hint);

static void emit_alternatives(js_conv *c, js_buf *b, const trie *t, int node, int depth, const char *hint) {
    js_buf_append(b, "( ");
    for (int ch = t->nodes[node].child; ch >= 0; ch = t->nodes[ch].sibling) {
        append_cp_literal(b, t->nodes[ch].cp);
        js_buf_append(b, " ");
        emit_rest(c, b, t, ch, depth + 1, hint);
        js_buf_append(b, " | ");
    }
    js_buf_append(b, "( [^\\x22\\x5C\\x00-\\x1F");
    for (int ch = t->nodes[node].child; ch >= 0; ch = t->nodes[ch].sibling) js_buf_class_char(b, t->nodes[ch].cp);
    js_buf_append(b, "] | \"\\\\\" escape ) char* \"\\\"\"");
    if (!t->nodes[node].terminal) js_buf_append(b, " | \"\\\"\"");
    js_buf_append(b, " )");
}

/* Long names would nest parentheses deeply (llama.cpp's parser recurses on them): every 32
 * characters the rest becomes a rule of its own. */
static void emit_rest(js_conv *c, js_buf *b, const trie *t, int node, int depth, const char *hint) {
    if (depth == 0 || depth % 32 != 0) {
        emit_alternatives(c, b, t, node, depth, hint);
        return;
    }
    js_buf sub = {0};
    emit_alternatives(c, &sub, t, node, depth, hint);
    const char *name = js_add_rule_buf(c, hint, &sub);
    if (name) js_buf_append(b, name);
}

static bool name_can_be_excluded(const char *name) {
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if (*p == '"' || *p == '\\' || *p < 0x20) return false;
    return true;
}

/* A rule for a JSON string that is none of the object's declared property names. */
static const char *other_key_rule(js_conv *c, json_t *props, const char *hint) {
    trie t = {0};
    bool ok = trie_new_node(&t, 0) == 0;
    const char *name;
    json_t *value;
    json_object_foreach(props, name, value) {
        (void)value;
        if (!name_can_be_excluded(name)) {
            free(t.nodes);
            return js_fail(c, "with additionalProperties, property name '%s' is not supported (it has a quote, "
                           "a backslash or a control character)", name);
        }
        ok = ok && trie_insert(&t, name);
    }
    if (!ok || !js_primitive(c, "char")) {
        free(t.nodes);
        return ok ? NULL : js_oom(c);
    }
    char *key_hint = js_hint(hint, "other-key");
    js_buf b = {0};
    js_buf_append(&b, "\"\\\"\" ");
    emit_rest(c, &b, &t, 0, 0, key_hint ? key_hint : "root-other-key");
    const char *rule = key_hint ? js_add_rule_buf(c, key_hint, &b) : (js_buf_free(&b), js_oom(c));
    free(key_hint);
    free(t.nodes);
    return rule;
}

/* ---- key/value rules -------------------------------------------------------------------------- */

static const char *kv_rule(js_conv *c, const char *key_expr, bool key_is_literal, const char *value_rule, const char *hint) {
    js_buf b = {0};
    if (key_is_literal) {
        js_buf key = {0};
        js_encode_string(&key, key_expr, strlen(key_expr));
        if (key.oom) b.oom = true;
        else js_buf_literal(&b, key.data, key.len);
        js_buf_free(&key);
    } else {
        js_buf_append(&b, key_expr);
    }
    js_buf_appendf(&b, " ws \":\" ws %s", value_rule);
    char *kv_hint = js_hint(hint, "kv");
    const char *rule = kv_hint ? js_add_rule_buf(c, kv_hint, &b) : (js_buf_free(&b), js_oom(c));
    free(kv_hint);
    return rule;
}

static const char *property_kv(js_conv *c, const char *name, json_t *schema, const char *hint) {
    char *prop_hint = js_hint(hint, name);
    if (!prop_hint) return js_oom(c);
    size_t saved = js_path_push(c, "properties");
    js_path_push(c, name);
    const char *value = c->visit_rule(c, schema, prop_hint);
    js_path_pop(c, saved);
    const char *kv = value ? kv_rule(c, name, true, value, prop_hint) : NULL;
    free(prop_hint);
    return kv;
}

static const char *additional_kv(js_conv *c, json_t *props, json_t *additional, const char *hint) {
    char *extra_hint = js_hint(hint, "additional");
    if (!extra_hint) return js_oom(c);
    size_t saved = js_path_push(c, "additionalProperties");
    const char *value = additional ? c->visit_rule(c, additional, extra_hint) : js_primitive(c, "value");
    js_path_pop(c, saved);
    const char *key = !value ? NULL : json_object_size(props) ? other_key_rule(c, props, hint) : js_primitive(c, "string");
    const char *kv = key ? kv_rule(c, key, false, value, extra_hint) : NULL;
    free(extra_hint);
    return kv;
}

/* ---- checks ----------------------------------------------------------------------------------- */

/* `required` as a set (a JSON object of names), each one declared in `properties`. */
static json_t *required_set(js_conv *c, json_t *props, json_t *required) {
    json_t *set = json_object();
    if (!set) return js_oom(c), NULL;
    if (required && !json_is_array(required)) {
        json_decref(set);
        return js_fail(c, "'required' must be an array of property names"), NULL;
    }
    size_t i;
    json_t *name;
    json_array_foreach(required, i, name) {
        const char *text = json_string_value(name);
        const char *problem = !text                             ? "'required' must be an array of property names"
                              : !json_object_get(props, text) ? "is not declared in 'properties'"
                                                                : NULL;
        if (problem) {
            if (text) js_fail(c, "required property '%s' %s", text, problem);
            else js_fail(c, "%s", problem);
            json_decref(set);
            return NULL;
        }
        json_object_set_new(set, text, json_true());
    }
    return set;
}

/* ---- the object ------------------------------------------------------------------------------- */

static void append_piece(js_buf *b, const obj_item *item) {
    if (item->repeated) js_buf_appendf(b, "( \",\" ws %s )*", item->kv);
    else if (item->required) js_buf_appendf(b, "\",\" ws %s", item->kv);
    else js_buf_appendf(b, "( \",\" ws %s )?", item->kv);
}

/* The items from i on, item i written first. */
static void append_first(js_buf *b, const obj_rules *r, size_t i) {
    const obj_item *item = &r->items[i];
    if (item->repeated) js_buf_appendf(b, "%s ( \",\" ws %s )*", item->kv, item->kv);
    else if (i + 1 < r->n) js_buf_appendf(b, "%s %s", item->kv, r->rest[i + 1]);
    else js_buf_append(b, item->kv);
}

static const char *add_numbered_rule(js_conv *c, const char *hint, const char *family, size_t i, js_buf *body) {
    char part[48];
    snprintf(part, sizeof part, "%s-%zu", family, i);
    char *name_hint = js_hint(hint, part);
    const char *rule = name_hint ? js_add_rule_buf(c, name_hint, body) : (js_buf_free(body), js_oom(c));
    free(name_hint);
    return rule;
}

static bool add_sequence_rules(js_conv *c, obj_rules *r, const char *hint) {
    for (size_t i = r->n; i-- > 1;) {
        js_buf b = {0};
        append_piece(&b, &r->items[i]);
        if (i + 1 < r->n) js_buf_appendf(&b, " %s", r->rest[i + 1]);
        if (!(r->rest[i] = add_numbered_rule(c, hint, "rest", i, &b))) return false;
    }
    return true;
}

static char *object_expr(js_conv *c, obj_rules *r, const char *hint) {
    if (r->n == 0) {
        js_buf b = {0};
        js_buf_append(&b, "\"{\" ws \"}\"");
        return js_take_expr(c, &b);
    }
    if (!add_sequence_rules(c, r, hint)) return NULL;
    size_t first_required = 0;
    while (first_required < r->n && !r->items[first_required].required) first_required++;
    bool any_required = first_required < r->n;
    /* The first item's alternatives form a rule of their own: llama.cpp refuses a repetition
     * (the "?") of a group in which more than 2000 rules first appear. */
    js_buf first = {0};
    for (size_t i = 0; i <= first_required && i < r->n; i++) {
        if (i) js_buf_append(&first, " | ");
        append_first(&first, r, i);
    }
    char *first_hint = js_hint(hint, "first");
    const char *first_rule = first_hint ? js_add_rule_buf(c, first_hint, &first) : (js_buf_free(&first), js_oom(c));
    free(first_hint);
    if (!first_rule) return NULL;
    js_buf b = {0};
    js_buf_appendf(&b, any_required ? "\"{\" ws %s ws \"}\"" : "\"{\" ws ( %s ws )? \"}\"", first_rule);
    return js_take_expr(c, &b);
}

static bool collect_items(js_conv *c, obj_rules *r, json_t *props, json_t *required, json_t *additional,
                          bool extra, const char *hint) {
    json_t *set = required_set(c, props, required);
    if (!set) return false;
    const char *name;
    json_t *prop;
    json_object_foreach(props, name, prop) {
        obj_item *item = &r->items[r->n];
        item->required = json_object_get(set, name) != NULL;
        if (!(item->kv = property_kv(c, name, prop, hint))) break;
        r->n++;
    }
    json_decref(set);
    if (c->failed) return false;
    if (extra) {
        obj_item *item = &r->items[r->n];
        item->repeated = true;
        if (!(item->kv = additional_kv(c, props, json_is_object(additional) ? additional : NULL, hint))) return false;
        r->n++;
    }
    return true;
}

static bool is_any(json_t *schema) { return json_is_true(schema) || (json_is_object(schema) && json_object_size(schema) == 0); }

char *js_visit_object(js_conv *c, json_t *schema, const char *hint) {
    json_t *props = json_object_get(schema, "properties");
    json_t *required = json_object_get(schema, "required");
    json_t *additional = json_object_get(schema, "additionalProperties");
    if (props && !json_is_object(props)) return js_fail(c, "'properties' must be an object"), NULL;
    if (json_object_size(props) > JS_MAX_PROPERTIES)
        return js_fail(c, "'properties' with %zu entries is not supported (at most %d per object)", json_object_size(props),
                       JS_MAX_PROPERTIES), NULL;
    if (additional && !json_is_boolean(additional) && !json_is_object(additional))
        return js_fail(c, "'additionalProperties' must be a boolean or a schema"), NULL;
    /* As llama.cpp: without additionalProperties, the declared properties only, or any object
     * when none are declared. */
    bool extra = additional ? !json_is_false(additional) : !props;
    bool any_extra = additional ? is_any(additional) : !props;
    bool none_required = !required || (json_is_array(required) && json_array_size(required) == 0);
    if (json_object_size(props) == 0 && any_extra && none_required)
        return js_primitive_expr(c, "object");
    if (!js_primitive(c, "ws")) return NULL;
    size_t n_max = json_object_size(props) + 1;
    obj_rules r = {calloc(n_max, sizeof *r.items), 0, calloc(n_max, sizeof *r.rest)};
    char *expr = NULL;
    if (!r.items || !r.rest) js_oom(c);
    else {
        c->consumed++; /* everything here follows "{" */
        if (collect_items(c, &r, props, required, additional, extra, hint)) expr = object_expr(c, &r, hint);
        c->consumed--;
    }
    free(r.items);
    free(r.rest);
    return expr;
}
