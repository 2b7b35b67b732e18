"""TAP for the Python test scripts: one counter for a whole run, however many
modules report into it, and the plan line at the end.

    from tap import ok, is_
    ...
    return tap.finish(tmp)   # prints the plan; keeps tmp only when a test failed
"""
import shutil
import sys

n = 0       # tests reported so far
failed = 0  # of them, failures


def ok(cond, name, diag=None):
    """One TAP line; a failure shows the first 20 lines of diag."""
    global n, failed
    n += 1
    if cond:
        print("ok %d - %s" % (n, name))
    else:
        failed += 1
        print("not ok %d - %s" % (n, name))
        if diag is not None:
            for line in str(diag).splitlines()[:20]:
                print("#   " + line)
    sys.stdout.flush()
    return cond


def skip(name, why):
    """A test that cannot run here: it counts, as a pass, with the reason."""
    global n
    n += 1
    print("ok %d - %s # SKIP %s" % (n, name, why))
    sys.stdout.flush()


def is_(got, want, name):
    return ok(got == want, name, "got:  %r\nwant: %r" % (got, want))


def finish(tmp=None):
    """The plan line and the exit status; tmp is removed when every test
    passed and kept (and named) for inspection when one failed."""
    if tmp is not None:
        if failed == 0:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print("# kept %s for inspection" % tmp)
    print("1..%d" % n)
    return 1 if failed else 0
