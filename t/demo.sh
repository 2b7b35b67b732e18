#!/bin/sh
# demo.sh: `make demo`. The quickstart needs denv-cp, denvd and denv; until
# they exist this says so plainly instead of pretending.
for b in bin/denv-cp bin/denvd bin/denv; do
	if [ ! -x "$b" ]; then
		echo "make demo: $b is not built yet, so there is no demo to run."
		echo "What works today is listed in README (What works today); make check tests it."
		exit 2
	fi
done
exec sh t/demo-run.sh
