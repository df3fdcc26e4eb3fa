/* postprocess.c — tokenizer.json "post_processor" for single sequences:
 * TemplateProcessing (special tokens around $A), ByteLevel (offsets only, so
 * ids are unchanged), RobertaProcessing / BertProcessing (cls $A sep) and
 * Sequence.  Applied only when special tokens are requested. */
#include <string.h>

#include "tokenizer/tok_internal.h"

void tok_post_free(tok_post *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_children; i++)
        tok_post_free(p->children[i]);
    oct_free(p->children);
    tok_ids_free(&p->before);
    tok_ids_free(&p->after);
    oct_free(p);
}

static oct_status nomem(oct_error *err)
{
    return oct_error_set(err, OCT_ERR_NOMEM, -1, "out of memory");
}

/* "cls": ["<s>", 0] */
static oct_status pair_id(const json_t *j, const char *key, const char *path, tok_ids *dst,
                          oct_error *err)
{
    const json_t *v = json_object_get(j, key);
    const json_t *id = json_array_get(v, 1);
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_integer(id) ||
        json_integer_value(id) < 0 || json_integer_value(id) > INT32_MAX)
        return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s.%s: expected [token, id]", path, key);
    if (!tok_ids_push(dst, (int32_t)json_integer_value(id)))
        return nomem(err);
    return OCT_OK;
}

static oct_status parse_template(const json_t *j, tok_post *p, const char *path, oct_error *err)
{
    const json_t *single = json_object_get(j, "single");
    const json_t *specials = json_object_get(j, "special_tokens");
    if (!json_is_array(single))
        return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s.single: expected an array", path);
    bool seen_a = false;
    for (size_t i = 0; i < json_array_size(single); i++) {
        const json_t *item = json_array_get(single, i);
        const json_t *sp = json_object_get(item, "SpecialToken");
        const json_t *sq = json_object_get(item, "Sequence");
        if (sq) {
            const char *id = json_string_value(json_object_get(sq, "id"));
            if (!id || strcmp(id, "A") != 0 || seen_a)
                return oct_error_set(err, OCT_ERR_UNSUPPORTED, -1,
                                     "%s.single[%zu]: only one Sequence \"A\" is supported", path,
                                     i);
            seen_a = true;
        } else if (sp) {
            const char *name = json_string_value(json_object_get(sp, "id"));
            const json_t *def = name ? json_object_get(specials, name) : NULL;
            const json_t *ids = json_object_get(def, "ids");
            if (!json_is_array(ids))
                return oct_error_set(err, OCT_ERR_FORMAT, -1,
                                     "%s.single[%zu]: special token '%s' not defined in "
                                     "special_tokens",
                                     path, i, name ? name : "?");
            for (size_t k = 0; k < json_array_size(ids); k++) {
                const json_t *v = json_array_get(ids, k);
                if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                    json_integer_value(v) > INT32_MAX)
                    return oct_error_set(err, OCT_ERR_FORMAT, -1,
                                         "%s.special_tokens['%s'].ids[%zu]: expected an id", path,
                                         name, k);
                if (!tok_ids_push(seen_a ? &p->after : &p->before, (int32_t)json_integer_value(v)))
                    return nomem(err);
            }
        } else {
            return oct_error_set(err, OCT_ERR_FORMAT, -1,
                                 "%s.single[%zu]: expected SpecialToken or Sequence", path, i);
        }
    }
    if (!seen_a)
        return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s.single: no Sequence \"A\"", path);
    return OCT_OK;
}

static oct_status post_slot(const json_t *elem, void *slot, const char *path, oct_error *err)
{
    return tok_post_parse(elem, slot, path, err);
}

oct_status tok_post_parse(const json_t *j, tok_post **out, const char *path, oct_error *err)
{
    *out = NULL;
    if (!json_is_object(j))
        return oct_error_set(err, OCT_ERR_FORMAT, -1, "%s: expected an object", path);
    const char *type;
    oct_status st = tok_json_str(j, "type", true, &type, NULL, path, err);
    if (st)
        return st;
    tok_post *p = oct_calloc(1, sizeof *p);
    if (!p)
        return nomem(err);
    if (strcmp(type, "TemplateProcessing") == 0) {
        static const char *const keys[] = {"type", "single", "pair", "special_tokens", NULL};
        p->kind = TOK_POST_TEMPLATE;
        if ((st = tok_json_known_keys(j, keys, path, err)) ||
            (st = parse_template(j, p, path, err)))
            goto fail;
    } else if (strcmp(type, "ByteLevel") == 0) {
        static const char *const keys[] = {"type", "add_prefix_space", "trim_offsets", "use_regex",
                                           NULL};
        p->kind = TOK_POST_NOOP;
        if ((st = tok_json_known_keys(j, keys, path, err)))
            goto fail;
    } else if (strcmp(type, "RobertaProcessing") == 0 || strcmp(type, "BertProcessing") == 0) {
        static const char *const keys[] = {"type", "sep", "cls", "trim_offsets", "add_prefix_space",
                                           NULL};
        p->kind = TOK_POST_TEMPLATE;
        if ((st = tok_json_known_keys(j, keys, path, err)) ||
            (st = pair_id(j, "cls", path, &p->before, err)) ||
            (st = pair_id(j, "sep", path, &p->after, err)))
            goto fail;
    } else if (strcmp(type, "Sequence") == 0) {
        void *kids;
        p->kind = TOK_POST_SEQUENCE;
        st = tok_json_sequence(j, "processors", path, post_slot, sizeof *p->children, &kids,
                               &p->n_children, err);
        p->children = kids;
        if (st)
            goto fail;
    } else {
        st = oct_error_set(err, OCT_ERR_UNSUPPORTED, -1, "%s: unsupported post_processor '%s'",
                           path, type);
        goto fail;
    }
    *out = p;
    return OCT_OK;
fail:
    tok_post_free(p);
    return st;
}

oct_status tok_post_apply(const tok_post *p, tok_ids *ids)
{
    switch (p->kind) {
    case TOK_POST_NONE:
    case TOK_POST_NOOP: return OCT_OK;
    case TOK_POST_SEQUENCE:
        for (size_t i = 0; i < p->n_children; i++) {
            oct_status st = tok_post_apply(p->children[i], ids);
            if (st)
                return st;
        }
        return OCT_OK;
    case TOK_POST_TEMPLATE: {
        size_t nb = p->before.n, na = p->after.n;
        for (size_t i = 0; i < nb + na; i++)
            if (!tok_ids_push(ids, 0))
                return OCT_ERR_NOMEM;
        size_t body = ids->n - nb - na;
        memmove(ids->v + nb, ids->v, body * sizeof *ids->v);
        if (nb)
            memcpy(ids->v, p->before.v, nb * sizeof *ids->v);
        if (na)
            memcpy(ids->v + nb + body, p->after.v, na * sizeof *ids->v);
        return OCT_OK;
    }
    }
    return OCT_ERR_INTERNAL;
}
