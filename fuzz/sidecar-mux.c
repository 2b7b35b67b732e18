/* Fuzz target: mux.c, dockerd's multiplexed exec output. The input is fed
 * in pieces whose sizes come from its first byte; the kept output never
 * exceeds the cap and never exceeds what was fed. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "sidecar/sidecar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mux m;
	struct err e;
	size_t step, fed = 0;

	if (size == 0)
		return 0;
	step = (size_t)data[0] % 17 + 1;
	data++;
	size--;
	mux_init(&m, 64);
	while (fed < size) {
		size_t n = size - fed < step ? size - fed : step;

		if (mux_feed(&m, (const char *)data + fed, n, &e) < 0)
			break;
		fed += n;
	}
	if (m.out[0].len > 64 || m.out[1].len > 64 || m.out[0].len + m.out[1].len > size)
		abort();
	mux_release(&m);
	return 0;
}
