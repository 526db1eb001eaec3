// SPDX-License-Identifier: GPL-2.0
/* A map declared the old way (struct bpf_map_def in section "maps", which libbpf 1.0 no longer
 * reads but older objects still carry): counts frames per RX queue, passes everything. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct legacy_map_def {
	unsigned int type;
	unsigned int key_size;
	unsigned int value_size;
	unsigned int max_entries;
	unsigned int map_flags;
};

struct legacy_map_def SEC("maps") per_queue = {
	.type = BPF_MAP_TYPE_ARRAY,
	.key_size = sizeof(__u32),
	.value_size = sizeof(__u64),
	.max_entries = 64,
};

SEC("xdp")
int legacy_count(struct xdp_md *ctx)
{
	__u32 q = ctx->rx_queue_index;
	__u64 *n = bpf_map_lookup_elem(&per_queue, &q);

	if (n)
		*n += 1;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
