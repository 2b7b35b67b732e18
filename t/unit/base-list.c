/* Unit tests: the intrusive list macros (list.h). */
#include <stddef.h>

#include "base/list.h"
#include "tap.h"

struct node {
	int id;
	struct node *prev, *next;
};

/* The ids from head on, as digits, into out; also checks every prev link. */
static const char *order(struct node *head, char *out)
{
	size_t i = 0;

	for (struct node *n = head, *prev = NULL; n && i < 8; prev = n, n = n->next) {
		if (n->prev != prev)
			return "broken prev link";
		out[i++] = (char)('0' + n->id);
	}
	out[i] = '\0';
	return out;
}

int main(void)
{
	struct node a = { 1, NULL, NULL }, b = { 2, NULL, NULL }, c = { 3, NULL, NULL };
	struct node *head = NULL;
	char s[9];

	DLIST_PUSH(head, &a);
	DLIST_PUSH(head, &b);
	DLIST_PUSH(head, &c);
	is_str(order(head, s), "321", "push puts each node at the front");
	DLIST_UNLINK(head, &b);
	is_str(order(head, s), "31", "unlink from the middle");
	ok(!b.prev && !b.next, "an unlinked node has no links");
	DLIST_UNLINK(head, &c);
	is_str(order(head, s), "1", "unlink the head");
	ok(head == &a, "the head moved on");
	DLIST_UNLINK(head, &a);
	ok(head == NULL, "unlinking the last node empties the list");
	DLIST_PUSH(head, &b);
	DLIST_PUSH(head, &a);
	DLIST_UNLINK(head, &b);
	is_str(order(head, s), "1", "unlink the tail");
	return tap_done();
}
