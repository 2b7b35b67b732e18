/* storage_zfs.c: the zfs backend (placeholder until step 4). */
#include "sidecar/sidecar.h"
#include "sidecar/storage.h"

static int z_no(struct err *e)
{
	return err_set(e, "storage zfs: not implemented yet");
}
static int z_env_prepare(const struct stg *s, const char *env, char *voldir, size_t n, struct err *e)
{ (void)s; (void)env; (void)voldir; (void)n; return z_no(e); }
static int z_adopt(const struct stg *s, const char *env, const char *vol, const char *tree, struct err *e)
{ (void)s; (void)env; (void)vol; (void)tree; return z_no(e); }
static int z_sync(const struct stg *s, const char *env, struct err *e) { (void)s; (void)env; return z_no(e); }
static int z_snapshot(const struct stg *s, const char *env, const char *name, const struct json *vols,
		      struct json *datasets, struct err *e)
{ (void)s; (void)env; (void)name; (void)vols; (void)datasets; return z_no(e); }
static int z_clone(const struct stg *s, const char *a, const char *b, const char *c, const char *d, struct err *e)
{ (void)s; (void)a; (void)b; (void)c; (void)d; return z_no(e); }
static int z_drop_snapshot(const struct stg *s, const char *env, const char *name, struct err *e)
{ (void)s; (void)env; (void)name; return z_no(e); }
static int z_drop_env(const struct stg *s, const char *env, struct err *e) { (void)s; (void)env; return z_no(e); }

const struct stg_ops stg_zfs_ops = {
	"zfs", z_env_prepare, z_adopt, z_sync, z_snapshot, z_clone, z_clone, z_drop_snapshot, z_drop_env,
};
