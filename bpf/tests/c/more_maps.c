// SPDX-License-Identifier: GPL-2.0
/* Map types beyond the hash and array kinds, one section each: ring buffers (reserve, submit,
 * discard, output, query), LPM tries updated and matched by the program, maps of maps, tail calls through a program
 * array the declaration fills. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} events SEC(".maps");

struct event {
	__u32 len;
	__u8 head[12];
};

/* One record per frame with its length and first 12 bytes, one discarded, one written with
 * bpf_ringbuf_output; XDP_DROP once the ring has no room for another reservation. */
SEC("xdp/ringbuf")
int ringbuf_prog(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct event *e, *gone;
	__u32 len = end - data;

	if (data + 12 > end)
		return XDP_PASS;
	gone = bpf_ringbuf_reserve(&events, 64, 0);
	if (gone)
		bpf_ringbuf_discard(gone, 0);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e)
		return XDP_DROP;
	e->len = len;
	__builtin_memcpy(e->head, data, 12);
	bpf_ringbuf_submit(e, 0);
	if (bpf_ringbuf_output(&events, &len, sizeof(len), 0))
		return XDP_ABORTED;
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) != 0)
		return XDP_ABORTED;
	return bpf_ringbuf_query(&events, BPF_RB_RING_SIZE) == 4096 ? XDP_PASS : XDP_ABORTED;
}

struct v4_key {
	__u32 prefixlen;
	__u8 addr[4];
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 8);
	__type(key, struct v4_key);
	__type(value, __u32);
	__uint(map_flags, BPF_F_NO_PREALLOC);
} routes SEC(".maps");

/* Adds 10.0.0.0/8 -> 1 and 10.1.0.0/16 -> 2, then returns the value of the longest prefix
 * holding the IPv4 destination (XDP_PASS, 2, for 10.1.x.x; XDP_DROP, 1, for the rest of 10/8)
 * or XDP_TX when none does. */
SEC("xdp/lpm")
int lpm_prog(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct v4_key k = { .prefixlen = 8, .addr = { 10, 0, 0, 0 } };
	__u32 v = 1, *found;

	if (data + 34 > end)
		return XDP_ABORTED;
	bpf_map_update_elem(&routes, &k, &v, BPF_ANY);
	k.prefixlen = 16;
	k.addr[1] = 1;
	v = 2;
	bpf_map_update_elem(&routes, &k, &v, BPF_ANY);
	k.prefixlen = 32;
	__builtin_memcpy(k.addr, data + 30, 4);
	found = bpf_map_lookup_elem(&routes, &k);
	return found ? *found : XDP_TX;
}

struct inner_map {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} inner_a SEC(".maps"), inner_b SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 2);
	__type(key, __u32);
	__array(values, struct inner_map);
} outer SEC(".maps") = { .values = { &inner_a, &inner_b } };

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, 2);
	__type(key, __u32);
	__array(values, struct inner_map);
} outer_hash SEC(".maps");

/* Counts frames in the map of entry 0 of `outer`, stores the last length in that of entry 1,
 * then XDP_PASS if `outer_hash` holds a map under key 7 (its first value + 2 when it is
 * non-zero), XDP_DROP if not. */
SEC("xdp/mim")
int mim_prog(struct xdp_md *ctx)
{
	__u32 k0 = 0, k1 = 1, k7 = 7, len = ctx->data_end - ctx->data, *v;
	void *inner;

	inner = bpf_map_lookup_elem(&outer, &k0);
	if (!inner)
		return XDP_ABORTED;
	v = bpf_map_lookup_elem(inner, &k0);
	if (v)
		*v += 1;
	inner = bpf_map_lookup_elem(&outer, &k1);
	if (!inner)
		return XDP_ABORTED;
	bpf_map_update_elem(inner, &k0, &len, BPF_ANY);
	inner = bpf_map_lookup_elem(&outer_hash, &k7);
	if (!inner)
		return XDP_DROP;
	v = bpf_map_lookup_elem(inner, &k0);
	return v && *v ? *v + 2 : XDP_PASS;
}

__u32 hops;

int tail_count(struct xdp_md *ctx);
int tail_pass(struct xdp_md *ctx);

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 4);
	__uint(key_size, sizeof(__u32));
	__array(values, int (void *));
} jumps SEC(".maps") = { .values = { [0] = (void *)&tail_count, [2] = (void *)&tail_pass } };

/* Counts itself and tail-calls itself until the kernel's limit stops it: 34 runs. */
SEC("xdp/tail_count")
int tail_count(struct xdp_md *ctx)
{
	hops++;
	bpf_tail_call(ctx, &jumps, 0);
	return XDP_DROP;
}

SEC("xdp/tail_pass")
int tail_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

/* An empty entry and one beyond the map go on here; entry 2 does not come back. */
SEC("xdp/tail")
int tail_entry(struct xdp_md *ctx)
{
	bpf_tail_call(ctx, &jumps, 1);
	bpf_tail_call(ctx, &jumps, 9);
	hops = 100;
	bpf_tail_call(ctx, &jumps, 2);
	return XDP_ABORTED;
}

char _license[] SEC("license") = "GPL";
