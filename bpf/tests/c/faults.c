// SPDX-License-Identifier: GPL-2.0
/* Programs the kernel's verifier would refuse, each with one run-time fault the engine must turn
 * into XDP_ABORTED (section xdp/<name>), and one well-behaved program (section xdp). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} empty SEC(".maps");

const volatile __u32 ro_word = 7;

SEC("xdp")
int well_behaved(struct xdp_md *ctx)
{
	return XDP_PASS;
}

/* A lookup that misses, dereferenced without the NULL check. */
SEC("xdp/null")
int null_deref(struct xdp_md *ctx)
{
	__u32 k = 1;
	__u64 *v = bpf_map_lookup_elem(&empty, &k);

	return *v ? XDP_DROP : XDP_PASS;
}

/* Reads one byte past data_end without a bounds check. */
SEC("xdp/oob")
int past_the_end(struct xdp_md *ctx)
{
	unsigned char *end = (void *)(long)ctx->data_end;

	return end[0] ? XDP_DROP : XDP_PASS;
}

/* Writes below the packet's headroom start through a pointer computed from data. */
SEC("xdp/under")
int under_the_start(struct xdp_md *ctx)
{
	unsigned char *data = (void *)(long)ctx->data;

	*(volatile unsigned char *)(data - 300) = 1;
	return XDP_PASS;
}

/* Never ends: the instruction budget stops it. */
SEC("xdp/loop")
int forever(struct xdp_md *ctx)
{
	volatile __u32 i = 0;

	while (i != 0xffffffff)
		i = (i + 2) & 0xfffffffe;
	return XDP_PASS;
}

/* Writes into .rodata through a pointer the compiler cannot see is constant. */
SEC("xdp/rodata")
int write_rodata(struct xdp_md *ctx)
{
	volatile __u32 *p = (volatile __u32 *)&ro_word;

	*p = 8;
	return XDP_PASS;
}

/* Recursion deeper than the eight frames the kernel allows. */
static __noinline int depth(int n)
{
	volatile int pad = n;

	return n <= 0 ? pad : depth(n - 1) + 1;
}

SEC("xdp/deep")
int too_deep(struct xdp_md *ctx)
{
	return depth(ctx->rx_queue_index + 20) > 0 ? XDP_PASS : XDP_DROP;
}

char _license[] SEC("license") = "GPL";
