/*
 * list.h: the intrusive doubly linked lists that hold live objects
 * (connections, client calls, name lookups). A node has prev and next
 * pointers; the list is a head pointer; a node that is on no list has
 * both NULL.
 */
#ifndef DENV_LIST_H
#define DENV_LIST_H

/* Take node off the list at head (a struct x *), leaving its links NULL. */
#define DLIST_UNLINK(head, node)                                  \
	do {                                                      \
		if ((node)->prev)                                 \
			(node)->prev->next = (node)->next;        \
		else                                              \
			(head) = (node)->next;                    \
		if ((node)->next)                                 \
			(node)->next->prev = (node)->prev;        \
		(node)->prev = (node)->next = NULL;               \
	} while (0)

/* Put node at the front of the list at head. */
#define DLIST_PUSH(head, node)                                    \
	do {                                                      \
		(node)->prev = NULL;                              \
		(node)->next = (head);                            \
		if (head)                                         \
			(head)->prev = (node);                    \
		(head) = (node);                                  \
	} while (0)

#endif
