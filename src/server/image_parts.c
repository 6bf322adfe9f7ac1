/* image_parts.c - the images of a chat request (OpenAI's image_url parts; Anthropic's image blocks
 * and the Responses API's input_image parts are made into those first): each becomes a text part
 * holding the image marker where it stood, and its bytes go to the typed request in that order,
 * as llama-server does before its chat template, so both template paths (Jinja, --no-jinja) see
 * text only. Only data URIs: a server that fetched URLs for its clients would reach wherever they
 * pointed it. */
#define _POSIX_C_SOURCE 200809L
#include "openai.h"

#include "../util/base64.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BAD(err, param, ...) openai_fail_with(err, MHD_HTTP_BAD_REQUEST, "invalid_request_error", param, __VA_ARGS__)

/* The bytes of a data URI "data:<type>;base64,<data>" into the request; false with *err. */
static bool take_data_uri(const char *url, const char *param, serve_request *req, openai_error *err) {
    if (strncmp(url, "data:", 5) != 0)
        return BAD(err, param, "'%s': image URLs are not fetched: send the image as a data URI "
                   "(\"data:image/png;base64,...\")", param);
    const char *comma = strchr(url, ',');
    const char *base64 = strstr(url, ";base64,");
    if (!comma || base64 != comma - 7)
        return BAD(err, param, "'%s' is not a base64 data URI (\"data:image/png;base64,...\")", param);
    bool bad = false;
    size_t size = 0;
    unsigned char *bytes = specd_base64_decode(comma + 1, &size, &bad);
    if (!bytes && bad) return BAD(err, param, "'%s': the data after \"base64,\" is not base64", param);
    if (!bytes || !serve_request_take_image(req, bytes, size))
        return openai_fail_with(err, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", NULL, "out of memory");
    return true;
}

/* One image part: its URL, from {"image_url": {"url"}} or {"image_url": "..."}. */
static const char *image_url_of(json_t *part) {
    json_t *v = json_object_get(part, "image_url");
    return json_is_string(v) ? json_string_value(v) : json_string_value(json_object_get(v, "url"));
}

/* The image parts of one message's content, each made a marker text part. */
static bool take_from_content(json_t *content, size_t index, serve_request *req, openai_error *err) {
    size_t i;
    json_t *part;
    json_array_foreach(content, i, part) {
        const char *type = json_string_value(json_object_get(part, "type"));
        if (!type || strcmp(type, "image_url")) continue;
        char param[96];
        snprintf(param, sizeof param, "messages[%zu].content[%zu].image_url", index, i);
        const char *url = image_url_of(part);
        if (!url) return BAD(err, param, "'%s' must be {\"url\": \"data:image/...;base64,...\"}", param);
        if (!take_data_uri(url, param, req, err)) return false;
        json_t *marker = json_pack("{s:s, s:s}", "type", "text", "text", specd_image_marker());
        if (!marker || json_array_set_new(content, i, marker) != 0)
            return openai_fail_with(err, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", NULL, "out of memory");
    }
    return true;
}

bool openai_take_images(json_t *messages, serve_request *req, openai_error *err) {
    size_t i;
    json_t *m;
    json_array_foreach(messages, i, m) {
        json_t *content = json_object_get(m, "content");
        if (json_is_array(content) && !take_from_content(content, i, req, err)) return false;
    }
    return true;
}

/* An OpenAI image part of a data URI: "data:" + media type + ";base64," + data (new). */
static json_t *image_url_part(const char *media_type, const char *base64) {
    size_t len = strlen(media_type) + strlen(base64) + 16;
    char *url = malloc(len);
    if (!url) return NULL;
    snprintf(url, len, "data:%s;base64,%s", media_type, base64);
    json_t *part = json_pack("{s:s, s:{s:s}}", "type", "image_url", "image_url", "url", url);
    free(url);
    return part;
}

json_t *openai_image_from_anthropic(json_t *block, const char *where, openai_error *err) {
    json_t *source = json_object_get(block, "source");
    const char *type = json_string_value(json_object_get(source, "type"));
    const char *media = json_string_value(json_object_get(source, "media_type"));
    const char *data = json_string_value(json_object_get(source, "data"));
    if (type && !strcmp(type, "url"))
        return BAD(err, where, "'%s': image URLs are not fetched: send the image as {\"type\": \"base64\", "
                   "\"media_type\", \"data\"}", where), NULL;
    if (!type || strcmp(type, "base64") || !media || !data)
        return BAD(err, where, "'%s' (image) needs a source {\"type\": \"base64\", \"media_type\", \"data\"}",
                   where), NULL;
    json_t *part = image_url_part(media, data);
    if (!part) openai_fail_with(err, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", NULL, "out of memory");
    return part;
}

json_t *openai_image_from_input_image(json_t *part, const char *where, openai_error *err) {
    json_t *url = json_object_get(part, "image_url");
    if (!json_is_string(url))
        return BAD(err, where, "'%s' (input_image) needs an 'image_url' (a data URI; file ids are not kept)", where),
               NULL;
    if (strncmp(json_string_value(url), "data:", 5) != 0) /* named here, as the client sent it */
        return BAD(err, where, "'%s': image URLs are not fetched: send the image as a data URI "
                   "(\"data:image/png;base64,...\")", where), NULL;
    json_t *made = json_pack("{s:s, s:{s:O}}", "type", "image_url", "image_url", "url", url);
    if (!made) openai_fail_with(err, MHD_HTTP_INTERNAL_SERVER_ERROR, "server_error", NULL, "out of memory");
    return made;
}
