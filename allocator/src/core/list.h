/*
 * list.h — intrusive doubly linked lists: the allocator's segments, a
 * domain's segments, the domains that hold memory, those asleep.
 *
 * - A list is a head pointer; each node carries its own prev and next
 *   fields (named per list, so one node can be on several lists).
 * - Push at the head and unlink: O(1); an unlinked node's fields are NULL.
 */
#ifndef CCA_LIST_H
#define CCA_LIST_H

#define CCAI_LIST_PUSH(head, x, prev, next)                                                                            \
    do {                                                                                                               \
        (x)->prev = NULL;                                                                                              \
        (x)->next = (head);                                                                                            \
        if (head)                                                                                                      \
            (head)->prev = (x);                                                                                        \
        (head) = (x);                                                                                                  \
    } while (0)
#define CCAI_LIST_UNLINK(head, x, prev, next)                                                                          \
    do {                                                                                                               \
        if ((x)->prev)                                                                                                 \
            (x)->prev->next = (x)->next;                                                                               \
        else                                                                                                           \
            (head) = (x)->next;                                                                                        \
        if ((x)->next)                                                                                                 \
            (x)->next->prev = (x)->prev;                                                                               \
        (x)->prev = (x)->next = NULL;                                                                                  \
    } while (0)

#endif /* CCA_LIST_H */
