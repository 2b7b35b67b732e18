/*
 * tree.c: the ordered trees (treaps) that hold rows and index entries
 * (store.h: the format and the rules).
 */
#include "store/internal.h"

#include <stdlib.h>
#include <string.h>


/* The value a node sorts by: only index nodes have one that is not "". */
const char *st_node_v(const struct tnode *n)
{
	return n->vlen ? ((const struct ixnode *)n)->v : "";
}

int st_bytes_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t n = alen < blen ? alen : blen;
	int c = n ? memcmp(a, b, n) : 0;

	if (c)
		return c;
	return alen < blen ? -1 : alen > blen;
}

/* Compare node n with key k: <0, 0, >0. */
static int node_cmp(const struct tnode *n, const struct tkey *k)
{
	int c = st_bytes_cmp(st_node_v(n), n->vlen, k->v, k->vlen);

	if (c)
		return c;
	if (k->id_inf)
		return -1;
	return st_bytes_cmp(n->row->id, n->row->idlen, k->id, k->idlen);
}

static struct tkey key_of(const struct tnode *n)
{
	struct tkey k = { st_node_v(n), n->vlen, n->row->id, n->row->idlen, false };
	return k;
}

static struct tnode *t_rot_right(struct tnode *n)
{
	struct tnode *l = n->l;
	n->l = l->r;
	l->r = n;
	return l;
}

static struct tnode *t_rot_left(struct tnode *n)
{
	struct tnode *r = n->r;
	n->r = r->l;
	r->l = n;
	return r;
}

struct tnode *st_t_insert(struct tnode *root, struct tnode *n)
{
	struct tkey k;

	if (!root)
		return n;
	k = key_of(n);
	if (node_cmp(root, &k) > 0) {
		root->l = st_t_insert(root->l, n);
		if (root->l->prio > root->prio)
			root = t_rot_right(root);
	} else {
		root->r = st_t_insert(root->r, n);
		if (root->r->prio > root->prio)
			root = t_rot_left(root);
	}
	return root;
}

static struct tnode *t_merge(struct tnode *a, struct tnode *b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	if (a->prio > b->prio) {
		a->r = t_merge(a->r, b);
		return a;
	}
	b->l = t_merge(a, b->l);
	return b;
}

struct tnode *st_t_remove(struct tnode *root, struct tnode *n)
{
	struct tkey k;

	if (!root)
		return NULL;
	if (root == n)
		return t_merge(root->l, root->r);
	k = key_of(n);
	if (node_cmp(root, &k) > 0)
		root->l = st_t_remove(root->l, n);
	else
		root->r = st_t_remove(root->r, n);
	return root;
}

struct tnode *st_t_find(struct tnode *n, const struct tkey *k)
{
	while (n) {
		int c = node_cmp(n, k);
		if (c == 0)
			return n;
		n = c > 0 ? n->l : n->r;
	}
	return NULL;
}

static void it_push(struct titer *it, struct tnode *n)
{
	if (it->n == it->cap) {
		it->cap = it->cap ? it->cap * 2 : 64;
		it->stack = xrealloc(it->stack, it->cap * sizeof(*it->stack));
	}
	it->stack[it->n++] = n;
}

void st_it_seek(struct titer *it, struct tnode *root, const struct tkey *k, bool rev)
{
	struct tnode *n = root;

	it->rev = rev;
	it->n = 0;
	while (n) {
		int c = node_cmp(n, k);
		if (!rev) {
			if (c > 0) {
				it_push(it, n);
				n = n->l;
			} else {
				n = n->r;
			}
		} else {
			if (c < 0) {
				it_push(it, n);
				n = n->r;
			} else {
				n = n->l;
			}
		}
	}
}

struct tnode *st_it_next(struct titer *it)
{
	struct tnode *x, *m;

	if (!it->n)
		return NULL;
	x = it->stack[--it->n];
	m = it->rev ? x->l : x->r;
	while (m) {
		it_push(it, m);
		m = it->rev ? m->r : m->l;
	}
	return x;
}

void st_it_release(struct titer *it)
{
	free(it->stack);
	it->stack = NULL;
	it->n = it->cap = 0;
}
