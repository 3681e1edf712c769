/* free_index_v1.h — the free index, version 1 (free_index_v1.c). */
#ifndef CCA_FREE_INDEX_V1_H
#define CCA_FREE_INDEX_V1_H

#include "types.h"
#include "../support/support.h"

/* Not on the allocator's path (the tests run it against v2); a zeroed
 * struct is an empty index. */
typedef struct ccai_v1_stream ccai_v1_stream; /* a stream's bins */
typedef struct ccai_free_index_v1 {
    ccai_v1_stream *streams;
    size_t count; /* blocks indexed */
    size_t bytes; /* their total size */
} ccai_free_index_v1;

cca_status ccai_free_index_v1_attach(ccai_free_index_v1 *ix, cca_stream stream);
void ccai_free_index_v1_detach(ccai_free_index_v1 *ix, cca_stream stream);
void ccai_free_index_v1_destroy(ccai_free_index_v1 *ix);
/* Insert and split fail (CCA_ERR_OUT_OF_MEMORY, nothing changed) when a
 * bin's array cannot grow; v2's never fail. */
cca_status ccai_free_index_v1_insert(ccai_free_index_v1 *ix, ccai_block *b);
void ccai_free_index_v1_remove(ccai_free_index_v1 *ix, ccai_block *b);
static inline void ccai_free_index_v1_take(ccai_free_index_v1 *ix, ccai_block *b) { ccai_free_index_v1_remove(ix, b); }
cca_status ccai_free_index_v1_split(ccai_free_index_v1 *ix, ccai_block *b, ccai_block *rest);
static inline bool ccai_free_index_v1_swap_recent(ccai_free_index_v1 *ix, ccai_block *n, ccai_block *b) {
    (void)ix, (void)n, (void)b;
    return false; /* no recent slot: the caller removes n and inserts b */
}
ccai_block *ccai_free_index_v1_best_fit(ccai_free_index_v1 *ix, cca_stream stream, size_t size, size_t max_size);
size_t ccai_free_index_v1_largest(const ccai_free_index_v1 *ix);
size_t ccai_free_index_v1_largest_run(const ccai_free_index_v1 *ix, size_t (*run)(const ccai_block *b), size_t floor);
bool ccai_free_index_v1_walk(const ccai_free_index_v1 *ix, bool (*fn)(void *user, const ccai_block *b), void *user);
const char *ccai_free_index_v1_check(const ccai_free_index_v1 *ix);

#endif /* CCA_FREE_INDEX_V1_H */
