/*
 * ccai_config_items.h — a config string's items, header-only: the one
 * splitting of "key:value,key:value" that cca_config_parse applies
 * (allocator/src/support/config.c) and ccrun --demo asks a key of.
 *
 * - Items are separated by ',' or '\n' (so cca_config_print's lines parse
 *   as they are); blanks (space, tab, CR) around an item, its key and its
 *   value are not part of them. Empty items are skipped.
 * - An item is cut at its first ':'; one without a ':' comes back with
 *   key NULL (the parser refuses it by the whole item's text).
 * - Nothing here knows a key or a value's grammar. Cost: one pass over the
 *   text, no allocation.
 */
#ifndef CCAI_CONFIG_ITEMS_H
#define CCAI_CONFIG_ITEMS_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

typedef struct ccai_config_item {
    const char *item; /* the item, blanks around it left out */
    size_t item_len;
    const char *key; /* NULL: the item has no ':' */
    size_t key_len;
    const char *val;
    size_t val_len;
} ccai_config_item;

static inline bool ccai_config_blank(char ch) {
    return ch == ' ' || ch == '\t' || ch == '\r';
}

static inline bool ccai_config_separator(char ch) {
    return ch == ',' || ch == '\n';
}

/* The next item at *p, and *p past it; false at the text's end. */
static inline bool ccai_config_next(const char **p, ccai_config_item *it) {
    const char *s = *p;
    while (ccai_config_blank(*s) || ccai_config_separator(*s))
        s++;
    if (!*s) {
        *p = s;
        return false;
    }
    const char *item = s;
    while (*s && !ccai_config_separator(*s))
        s++;
    *p = s;
    size_t item_len = (size_t)(s - item);
    while (item_len && ccai_config_blank(item[item_len - 1]))
        item_len--;
    it->item = item;
    it->item_len = item_len;
    const char *colon = memchr(item, ':', item_len);
    if (!colon) {
        it->key = it->val = NULL;
        it->key_len = it->val_len = 0;
        return true;
    }
    size_t key_len = (size_t)(colon - item);
    const char *val = colon + 1;
    size_t val_len = item_len - key_len - 1;
    while (key_len && ccai_config_blank(item[key_len - 1]))
        key_len--;
    while (val_len && ccai_config_blank(*val))
        val++, val_len--;
    it->key = item;
    it->key_len = key_len;
    it->val = val;
    it->val_len = val_len;
    return true;
}

/* Whether an item of the text has this key (what its value is, and whether
 * the parser takes it, is not asked). */
static inline bool ccai_config_names(const char *text, const char *key) {
    size_t klen = strlen(key);
    ccai_config_item it;
    while (ccai_config_next(&text, &it))
        if (it.key && it.key_len == klen && memcmp(it.key, key, klen) == 0)
            return true;
    return false;
}

#endif
