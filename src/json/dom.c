/* dom.c: building, copying, comparing and reading JSON trees. */
#include "json/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static struct json *new_node(enum json_type t)
{
	struct json *v = xcalloc(1, sizeof(*v));
	v->type = t;
	return v;
}

struct json *json_new_null(void) { return new_node(JSON_NULL); }

struct json *json_new_bool(bool b)
{
	struct json *v = new_node(JSON_BOOL);
	v->u.b = b;
	return v;
}

struct json *json_new_int(int64_t i)
{
	struct json *v = new_node(JSON_INT);
	v->u.i = i;
	return v;
}

struct json *json_new_double(double d)
{
	struct json *v = new_node(JSON_DOUBLE);
	v->u.d = d;
	return v;
}

struct json *json_new_strn(const char *s, size_t len)
{
	struct json *v = new_node(JSON_STRING);
	v->u.str.s = xmalloc(len + 1);
	if (len)
		memcpy(v->u.str.s, s, len);
	v->u.str.s[len] = '\0';
	v->u.str.len = len;
	return v;
}

struct json *json_new_str(const char *s)
{
	return json_new_strn(s, strlen(s));
}

struct json *json_new_array(void) { return new_node(JSON_ARRAY); }
struct json *json_new_object(void) { return new_node(JSON_OBJECT); }

void json_array_push(struct json *arr, struct json *v)
{
	if (arr->u.arr.n == arr->u.arr.cap) {
		arr->u.arr.cap = arr->u.arr.cap ? arr->u.arr.cap * 2 : 4;
		arr->u.arr.items = xrealloc(arr->u.arr.items, arr->u.arr.cap * sizeof(*arr->u.arr.items));
	}
	arr->u.arr.items[arr->u.arr.n++] = v;
}

static struct json_member *find_member(const struct json *obj, const char *key, size_t key_len)
{
	for (size_t i = 0; i < obj->u.obj.n; i++) {
		struct json_member *m = &obj->u.obj.m[i];
		if (m->key_len == key_len && memcmp(m->key, key, key_len) == 0)
			return m;
	}
	return NULL;
}

void json_object_setn(struct json *obj, const char *key, size_t key_len, struct json *v)
{
	struct json_member *m = find_member(obj, key, key_len);

	if (m) {
		json_free(m->val);
		m->val = v;
		return;
	}
	if (obj->u.obj.n == obj->u.obj.cap) {
		obj->u.obj.cap = obj->u.obj.cap ? obj->u.obj.cap * 2 : 4;
		obj->u.obj.m = xrealloc(obj->u.obj.m, obj->u.obj.cap * sizeof(*obj->u.obj.m));
	}
	m = &obj->u.obj.m[obj->u.obj.n++];
	m->key = xmalloc(key_len + 1);
	memcpy(m->key, key, key_len);
	m->key[key_len] = '\0';
	m->key_len = key_len;
	m->val = v;
}

void json_object_set(struct json *obj, const char *key, struct json *v)
{
	json_object_setn(obj, key, strlen(key), v);
}

void json_object_set_str(struct json *obj, const char *key, const char *s)
{
	json_object_set(obj, key, s ? json_new_str(s) : json_new_null());
}

void json_object_set_int(struct json *obj, const char *key, int64_t i)
{
	json_object_set(obj, key, json_new_int(i));
}

void json_object_set_bool(struct json *obj, const char *key, bool b)
{
	json_object_set(obj, key, json_new_bool(b));
}

bool json_object_del(struct json *obj, const char *key)
{
	struct json_member *m;
	size_t i;

	if (!obj || obj->type != JSON_OBJECT)
		return false;
	m = find_member(obj, key, strlen(key));
	if (!m)
		return false;
	i = (size_t)(m - obj->u.obj.m);
	free(m->key);
	json_free(m->val);
	memmove(m, m + 1, (obj->u.obj.n - i - 1) * sizeof(*m));
	obj->u.obj.n--;
	return true;
}

/* Iterative, with a stack of nodes still to free, so that a tree as deep as
 * any parse limit a caller chose is freed without deep C recursion. */
void json_free(struct json *v)
{
	struct json *small[64], **stack = small;
	size_t n = 0, cap = sizeof(small) / sizeof(small[0]);

	if (!v)
		return;
	stack[n++] = v;
	while (n > 0) {
		struct json *c = stack[--n];
		size_t kids = c->type == JSON_ARRAY ? c->u.arr.n : c->type == JSON_OBJECT ? c->u.obj.n : 0;

		if (kids > cap - n) {
			struct json **ns;
			while (kids > cap - n)
				cap *= 2;
			ns = xmalloc(cap * sizeof(*ns));
			memcpy(ns, stack, n * sizeof(*ns));
			if (stack != small)
				free(stack);
			stack = ns;
		}
		switch (c->type) {
		case JSON_STRING:
			free(c->u.str.s);
			break;
		case JSON_ARRAY:
			for (size_t i = 0; i < c->u.arr.n; i++)
				if (c->u.arr.items[i])
					stack[n++] = c->u.arr.items[i];
			free(c->u.arr.items);
			break;
		case JSON_OBJECT:
			for (size_t i = 0; i < c->u.obj.n; i++) {
				free(c->u.obj.m[i].key);
				if (c->u.obj.m[i].val)
					stack[n++] = c->u.obj.m[i].val;
			}
			free(c->u.obj.m);
			break;
		default:
			break;
		}
		free(c);
	}
	if (stack != small)
		free(stack);
}

struct json *json_dup(const struct json *v)
{
	struct json *c;

	if (!v)
		return NULL;
	switch (v->type) {
	case JSON_STRING:
		return json_new_strn(v->u.str.s, v->u.str.len);
	case JSON_ARRAY:
		c = json_new_array();
		for (size_t i = 0; i < v->u.arr.n; i++)
			json_array_push(c, json_dup(v->u.arr.items[i]));
		return c;
	case JSON_OBJECT:
		c = json_new_object();
		for (size_t i = 0; i < v->u.obj.n; i++)
			json_object_setn(c, v->u.obj.m[i].key, v->u.obj.m[i].key_len,
					 json_dup(v->u.obj.m[i].val));
		return c;
	default:
		c = new_node(v->type);
		c->u = v->u;
		return c;
	}
}

static bool is_number(const struct json *v)
{
	return v->type == JSON_INT || v->type == JSON_DOUBLE;
}

static double as_double(const struct json *v)
{
	return v->type == JSON_INT ? (double)v->u.i : v->u.d;
}

bool json_equal(const struct json *a, const struct json *b)
{
	if (!a || !b)
		return a == b;
	if (is_number(a) && is_number(b)) {
		if (a->type == JSON_INT && b->type == JSON_INT)
			return a->u.i == b->u.i;
		return as_double(a) == as_double(b);
	}
	if (a->type != b->type)
		return false;
	switch (a->type) {
	case JSON_NULL:
		return true;
	case JSON_BOOL:
		return a->u.b == b->u.b;
	case JSON_STRING:
		return a->u.str.len == b->u.str.len && memcmp(a->u.str.s, b->u.str.s, a->u.str.len) == 0;
	case JSON_ARRAY:
		if (a->u.arr.n != b->u.arr.n)
			return false;
		for (size_t i = 0; i < a->u.arr.n; i++)
			if (!json_equal(a->u.arr.items[i], b->u.arr.items[i]))
				return false;
		return true;
	case JSON_OBJECT:
		if (a->u.obj.n != b->u.obj.n)
			return false;
		for (size_t i = 0; i < a->u.obj.n; i++) {
			const struct json_member *am = &a->u.obj.m[i], *m = &b->u.obj.m[i];
			/* Same position first: trees usually share member order, and
			 * this keeps comparing large objects from going quadratic. */
			if (m->key_len != am->key_len || memcmp(m->key, am->key, am->key_len) != 0)
				m = find_member(b, am->key, am->key_len);
			if (!m || !json_equal(am->val, m->val))
				return false;
		}
		return true;
	default:
		return false;
	}
}

struct json *json_get(const struct json *obj, const char *key)
{
	struct json_member *m;

	if (!obj || obj->type != JSON_OBJECT)
		return NULL;
	m = find_member(obj, key, strlen(key));
	return m ? m->val : NULL;
}

const char *json_get_str(const struct json *obj, const char *key)
{
	struct json *v = json_get(obj, key);
	return v && v->type == JSON_STRING ? v->u.str.s : NULL;
}

int64_t json_get_int(const struct json *obj, const char *key, int64_t fallback)
{
	struct json *v = json_get(obj, key);

	if (!v)
		return fallback;
	if (v->type == JSON_INT)
		return v->u.i;
	/* A double with an exact integer value (1e3) reads as that integer. */
	if (v->type == JSON_DOUBLE && v->u.d == floor(v->u.d) &&
	    v->u.d >= -9223372036854775808.0 && v->u.d < 9223372036854775808.0)
		return (int64_t)v->u.d;
	return fallback;
}

double json_get_double(const struct json *obj, const char *key, double fallback)
{
	struct json *v = json_get(obj, key);
	return v && is_number(v) ? as_double(v) : fallback;
}

bool json_get_bool(const struct json *obj, const char *key, bool fallback)
{
	struct json *v = json_get(obj, key);
	return v && v->type == JSON_BOOL ? v->u.b : fallback;
}

size_t json_len(const struct json *v)
{
	if (!v)
		return 0;
	if (v->type == JSON_ARRAY)
		return v->u.arr.n;
	if (v->type == JSON_OBJECT)
		return v->u.obj.n;
	return 0;
}

struct json *json_at(const struct json *arr, size_t i)
{
	if (!arr || arr->type != JSON_ARRAY || i >= arr->u.arr.n)
		return NULL;
	return arr->u.arr.items[i];
}

const char *json_type_name(enum json_type t)
{
	static const char *names[] = { "null", "boolean", "integer", "number", "string", "array", "object" };
	return (unsigned)t < sizeof(names) / sizeof(names[0]) ? names[t] : "unknown";
}
