// SPDX-License-Identifier: GPL-2.0
/* Programs the kernel's verifier refuses, one a section, and neighbours it loads: the engine's
 * static check (onic_bpf::verify) must refuse the first with the kernel's words and load the
 * others. `onic run --kernel-verify` shows the kernel's own verdict on each. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u32);
} counts SEC(".maps");

/* egress_ifindex exists only for programs run from a devmap entry. */
SEC("xdp/egress")
int read_egress(struct xdp_md *ctx)
{
	return ctx->egress_ifindex ? XDP_DROP : XDP_PASS;
}

SEC("xdp/devmap")
int devmap_egress(struct xdp_md *ctx)
{
	return ctx->egress_ifindex ? XDP_DROP : XDP_PASS;
}

/* XDP context fields are read whole, four bytes at a time. */
SEC("xdp/narrow")
int narrow_read(struct xdp_md *ctx)
{
	return *(volatile __u16 *)&ctx->ingress_ifindex == 1 ? XDP_DROP : XDP_PASS;
}

/* The context is read-only. */
SEC("xdp/ctx_write")
int ctx_write(struct xdp_md *ctx)
{
	*(volatile __u32 *)&ctx->rx_queue_index = 0;
	return XDP_PASS;
}

/* Beyond the 512 bytes of a stack frame. */
SEC("xdp/stack")
int stack_beyond(struct xdp_md *ctx)
{
	asm volatile("r2 = 7; *(u64 *)(r10 - 520) = r2" ::: "r2");
	return XDP_PASS;
}

/* A number is no pointer. */
SEC("xdp/null")
int null_read(struct xdp_md *ctx)
{
	int r;

	asm volatile("r1 = 0; %0 = *(u32 *)(r1 + 0)" : "=r"(r) :: "r1");
	return r;
}

/* bpf_tail_call takes a program array. */
SEC("xdp/map_arg")
int wrong_map(struct xdp_md *ctx)
{
	bpf_tail_call(ctx, &counts, 0);
	return XDP_PASS;
}

/* bpf_xdp_adjust_head takes the context. */
SEC("xdp/ctx_arg")
int not_ctx(struct xdp_md *ctx)
{
	return bpf_xdp_adjust_head((struct xdp_md *)0, 4) ? XDP_ABORTED : XDP_PASS;
}

/* The packet handed to a helper that may not read it (bpf_ringbuf_output takes memory, but not
 * the packet's). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} ring SEC(".maps");

SEC("xdp/pkt_helper")
int pkt_helper(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;

	if (data + 8 > (void *)(long)ctx->data_end)
		return XDP_DROP;
	bpf_ringbuf_output(&ring, data, 8, 0);
	return XDP_PASS;
}

/* The same for the other helpers that take memory but not the packet's, and two that may read
 * the packet (bpf_csum_diff, a map update with key and value in the packet). */
struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} events SEC(".maps");

#define PACKET_OF_64(ctx)                                                       \
	void *data = (void *)(long)ctx->data;                                   \
	if (data + 64 > (void *)(long)ctx->data_end)                            \
		return XDP_DROP

SEC("xdp/pkt_perf")
int pkt_perf(struct xdp_md *ctx)
{
	PACKET_OF_64(ctx);
	bpf_perf_event_output(ctx, &events, BPF_F_CURRENT_CPU, data, 8);
	return XDP_PASS;
}

SEC("xdp/pkt_printk")
int pkt_printk(struct xdp_md *ctx)
{
	PACKET_OF_64(ctx);
	bpf_trace_printk(data, 8);
	return XDP_PASS;
}

SEC("xdp/pkt_load")
int pkt_load(struct xdp_md *ctx)
{
	PACKET_OF_64(ctx);
	bpf_xdp_load_bytes(ctx, 0, data, 8);
	return XDP_PASS;
}

SEC("xdp/pkt_store")
int pkt_store(struct xdp_md *ctx)
{
	PACKET_OF_64(ctx);
	bpf_xdp_store_bytes(ctx, 0, data, 8);
	return XDP_PASS;
}

SEC("xdp/pkt_fib")
int pkt_fib(struct xdp_md *ctx)
{
	PACKET_OF_64(ctx);
	bpf_fib_lookup(ctx, data, 64, 0);
	return XDP_PASS;
}

SEC("xdp/pkt_mtu")
int pkt_mtu(struct xdp_md *ctx)
{
	PACKET_OF_64(ctx);
	bpf_check_mtu(ctx, 0, data, 0, 0);
	return XDP_PASS;
}

SEC("xdp/pkt_allowed")
int pkt_allowed(struct xdp_md *ctx)
{
	PACKET_OF_64(ctx);
	bpf_map_update_elem(&counts, data, data + 4, BPF_ANY);
	return bpf_csum_diff(data, 8, data + 8, 8, 0) ? XDP_PASS : XDP_DROP;
}

/* A packet read must lie within the bytes a comparison with data_end proved: one byte past the
 * check, a read with no check at all, and a pointer used after bpf_xdp_adjust_head moved the
 * packet (it is a number to the kernel then). Their neighbours read just within the check, in
 * every form of the comparison the kernel matches. */
SEC("xdp/pkt_past")
int pkt_past(struct xdp_md *ctx)
{
	PACKET_OF_64(ctx);
	return ((volatile __u8 *)data)[64] ? XDP_DROP : XDP_PASS;
}

SEC("xdp/pkt_unchecked")
int pkt_unchecked(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;

	return ((volatile __u8 *)data)[12] ? XDP_DROP : XDP_PASS;
}

SEC("xdp/pkt_adjusted")
int pkt_adjusted(struct xdp_md *ctx)
{
	PACKET_OF_64(ctx);
	if (bpf_xdp_adjust_head(ctx, 4))
		return XDP_ABORTED;
	return ((volatile __u8 *)data)[0] ? XDP_DROP : XDP_PASS;
}

/* The comparison written out, so that each of the forms the kernel matches appears as written:
 * r2 is data + 14, r3 data_end; the read is of byte 13 (the last proven) on the safe side. */
#define CMP_FORM(name, jump, safe_first)                                        \
	SEC("xdp/" #name)                                                       \
	int name(struct xdp_md *ctx)                                            \
	{                                                                       \
		int r;                                                          \
		asm volatile("r2 = *(u32 *)(%[ctx] + 0)\n"                      \
			     "r3 = *(u32 *)(%[ctx] + 4)\n"                      \
			     "r2 += 14\n"                                       \
			     jump " goto 1f\n"                                  \
			     safe_first                                         \
			     : "=r"(r)                                          \
			     : [ctx] "r"(ctx)                                   \
			     : "r2", "r3");                                     \
		return r;                                                       \
	}

/* Fall through when safe, or jump when safe. */
#define SAFE_FALL "%0 = *(u8 *)(r2 - 1)\n goto 2f\n 1: %0 = 1\n 2:\n"
#define SAFE_JUMP "%0 = 1\n goto 2f\n 1: %0 = *(u8 *)(r2 - 1)\n 2:\n"

CMP_FORM(pkt_gt, "if r2 > r3", SAFE_FALL)
CMP_FORM(pkt_ge, "if r2 >= r3", SAFE_FALL)
CMP_FORM(pkt_lt, "if r2 < r3", SAFE_JUMP)
CMP_FORM(pkt_le, "if r2 <= r3", SAFE_JUMP)
CMP_FORM(end_gt, "if r3 > r2", SAFE_JUMP)
CMP_FORM(end_ge, "if r3 >= r2", SAFE_JUMP)
CMP_FORM(end_lt, "if r3 < r2", SAFE_FALL)
CMP_FORM(end_le, "if r3 <= r2", SAFE_FALL)
/* The same with the read on the unsafe side. */
CMP_FORM(pkt_gt_bad, "if r2 > r3", SAFE_JUMP)
CMP_FORM(end_ge_bad, "if r3 >= r2", SAFE_FALL)

/* What the kernel loads: every field read whole, the stack within its frame, a map lookup. */
SEC("xdp/fine")
int fine(struct xdp_md *ctx)
{
	__u32 k = ctx->rx_queue_index, *v;
	volatile __u64 pad[60] = {};

	pad[59] = ctx->ingress_ifindex;
	v = bpf_map_lookup_elem(&counts, &k);
	if (v)
		*v += pad[59];
	return ctx->data_meta <= ctx->data ? XDP_PASS : XDP_DROP;
}

char _license[] SEC("license") = "GPL";
