/*
 * store-util.h: helpers shared by the store unit tests (static inline so each
 * test file takes what it uses): parse a row, name a directory in the TAP
 * temp dir, and put or delete one row in a transaction of its own.
 */
#ifndef DENV_T_STORE_UTIL_H
#define DENV_T_STORE_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "json/json.h"
#include "store/store.h"
#include "tap.h"

/* The JSON text parsed; a test's own bad JSON ends the test (exit 2). */
static inline struct json *row(const char *text)
{
	struct json *v = NULL;
	struct err e;

	if (json_parse(text, strlen(text), NULL, &v, &e) < 0) {
		fprintf(stderr, "bad test JSON %s: %s\n", text, e.msg);
		exit(2);
	}
	return v;
}

/* tap_tmpdir()/name, malloc'd: the caller frees it. */
static inline char *dir_named(const char *name)
{
	struct buf b = BUF_INIT;

	buf_addf(&b, "%s/%s", tap_tmpdir(), name);
	return buf_detach(&b, NULL);
}

/* Put table/id = json in a transaction of its own. Returns 0, or -1 (said
 * with tap_diag). */
static inline int put1(struct st_db *db, const char *table, const char *id, const char *json)
{
	struct st_txn *t = st_begin(db);
	struct err e;

	st_put(t, table, id, row(json));
	if (st_commit(t, NULL, NULL, &e) < 0) {
		tap_diag("commit %s/%s: %s", table, id, e.msg);
		return -1;
	}
	return 0;
}

/* Delete table/id in a transaction of its own. Returns st_commit's result. */
static inline int del1(struct st_db *db, const char *table, const char *id)
{
	struct st_txn *t = st_begin(db);
	struct err e;

	st_delete(t, table, id);
	return st_commit(t, NULL, NULL, &e);
}

#endif
