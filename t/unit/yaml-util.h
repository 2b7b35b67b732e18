/*
 * yaml-util.h: a helper shared by the YAML unit tests (yaml-parse.c,
 * yaml-fixtures.c): comparing the tree a YAML text gives with the one
 * expected, number types kept apart.
 */
#ifndef DENV_T_YAML_UTIL_H
#define DENV_T_YAML_UTIL_H

#include <stdbool.h>
#include <string.h>

#include "json/json.h"

/* json_equal, but an INT and a DOUBLE are different (1 is not 1.0). */
static inline bool same_typed(const struct json *a, const struct json *b)
{
	if (!a || !b || a->type != b->type)
		return a == b;
	switch (a->type) {
	case JSON_ARRAY:
		if (a->u.arr.n != b->u.arr.n)
			return false;
		for (size_t i = 0; i < a->u.arr.n; i++)
			if (!same_typed(a->u.arr.items[i], b->u.arr.items[i]))
				return false;
		return true;
	case JSON_OBJECT:
		if (a->u.obj.n != b->u.obj.n)
			return false;
		for (size_t i = 0; i < a->u.obj.n; i++) {
			const struct json_member *m = &a->u.obj.m[i];
			const struct json *bv = NULL;
			for (size_t j = 0; j < b->u.obj.n; j++)
				if (b->u.obj.m[j].key_len == m->key_len &&
				    memcmp(b->u.obj.m[j].key, m->key, m->key_len) == 0)
					bv = b->u.obj.m[j].val;
			if (!same_typed(m->val, bv))
				return false;
		}
		return true;
	default:
		return json_equal(a, b);
	}
}

#endif
