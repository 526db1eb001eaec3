// SPDX-License-Identifier: GPL-2.0
/*
 * The VM test's loader for xdp_hash.o: iproute2 cannot load device-bound programs (the RX-metadata
 * kfuncs need BPF_F_XDP_DEV_BOUND_ONLY and the device's ifindex at load time), so this does it
 * with libbpf, attaches the program natively, waits, prints what the program saw and detaches:
 *
 *   onic_xdp_hash <ifname> <object> <seconds>
 *   -> "calls=<n> errors=<n> hash=0x<hash> type=0x<type>"
 */
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>

/* include/uapi/linux/bpf.h of 6.3+; the host's headers may predate it. */
#ifndef BPF_F_XDP_DEV_BOUND_ONLY
#define BPF_F_XDP_DEV_BOUND_ONLY (1U << 6)
#endif

int main(int argc, char **argv)
{
	struct bpf_object *obj;
	struct bpf_program *prog;
	struct bpf_map *map;
	unsigned long long v[4] = { 0 };
	unsigned int ifindex, k;
	int err;

	if (argc != 4) {
		fprintf(stderr, "usage: %s <ifname> <object> <seconds>\n", argv[0]);
		return 2;
	}
	ifindex = if_nametoindex(argv[1]);
	if (!ifindex) {
		perror(argv[1]);
		return 1;
	}
	obj = bpf_object__open_file(argv[2], NULL);
	if (!obj) {
		fprintf(stderr, "cannot open %s\n", argv[2]);
		return 1;
	}
	prog = bpf_object__find_program_by_name(obj, "xdp_hash");
	map = bpf_object__find_map_by_name(obj, "onic_hash");
	if (!prog || !map) {
		fprintf(stderr, "xdp_hash or onic_hash missing in %s\n", argv[2]);
		return 1;
	}
	bpf_program__set_ifindex(prog, ifindex);
	bpf_program__set_flags(prog, BPF_F_XDP_DEV_BOUND_ONLY);
	err = bpf_object__load(obj);
	if (err) {
		fprintf(stderr, "load: %d\n", err);
		return 1;
	}
	err = bpf_xdp_attach(ifindex, bpf_program__fd(prog), XDP_FLAGS_DRV_MODE, NULL);
	if (err) {
		fprintf(stderr, "attach: %d\n", err);
		return 1;
	}
	printf("attached\n");
	fflush(stdout);
	sleep(atoi(argv[3]));
	for (k = 0; k < 4; k++)
		bpf_map_lookup_elem(bpf_map__fd(map), &k, &v[k]);
	bpf_xdp_detach(ifindex, XDP_FLAGS_DRV_MODE, NULL);
	printf("calls=%llu errors=%llu hash=0x%08llx type=0x%llx\n", v[0], v[1], v[2], v[3]);
	return 0;
}
