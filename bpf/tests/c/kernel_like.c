// SPDX-License-Identifier: GPL-2.0
/* What XDP programs written for the kernel use beyond the basics, one section each: a map sized
 * by its loader, cpumap and broadcast redirects, the byte-access helpers, bpf_check_mtu,
 * bpf_loop, spin locks. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* No max_entries: the loader sizes it (the engine: Loader::unsized_max_entries). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, __u64);
} rx_cnt SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(struct bpf_cpumap_val));
	__uint(max_entries, 4);
} cpu_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
	__uint(max_entries, 8);
} ports SEC(".maps");

struct locked {
	struct bpf_spin_lock lock;
	__u64 n;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct locked);
	__uint(max_entries, 1);
} counter SEC(".maps");

SEC("xdp")
int count_unsized(struct xdp_md *ctx)
{
	__u32 last = 0;
	__u64 *v = bpf_map_lookup_elem(&rx_cnt, &last);

	if (v)
		*v += 1;
	return XDP_PASS;
}

SEC("xdp")
int to_cpu(struct xdp_md *ctx)
{
	return bpf_redirect_map(&cpu_map, ctx->rx_queue_index + 1, XDP_DROP);
}

SEC("xdp")
int to_all(struct xdp_md *ctx)
{
	return bpf_redirect_map(&ports, 0, BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS);
}

/* Reads the first 14 bytes, writes them back with the addresses swapped, returns the length. */
SEC("xdp")
int bytes(struct xdp_md *ctx)
{
	__u8 h[14], t[6];
	int i;

	if (bpf_xdp_load_bytes(ctx, 0, h, sizeof(h)))
		return XDP_ABORTED;
	for (i = 0; i < 6; i++) {
		t[i] = h[i];
		h[i] = h[i + 6];
		h[i + 6] = t[i];
	}
	if (bpf_xdp_store_bytes(ctx, 0, h, sizeof(h)))
		return XDP_ABORTED;
	/* Past the end: -EINVAL, not a fault. */
	if (bpf_xdp_load_bytes(ctx, bpf_xdp_get_buff_len(ctx), h, 1) != -22)
		return XDP_ABORTED;
	return bpf_xdp_get_buff_len(ctx) > 100 ? XDP_TX : XDP_PASS;
}

SEC("xdp")
int mtu(struct xdp_md *ctx)
{
	__u32 len = 0;

	if (bpf_check_mtu(ctx, 0, &len, 0, 0))
		return XDP_DROP;
	return len == 1500 ? XDP_PASS : XDP_ABORTED;
}

struct sum_ctx {
	struct xdp_md *xdp;
	__u64 sum;
};

static long add_one(__u32 i, void *data)
{
	struct sum_ctx *c = data;

	c->sum += i;
	return c->sum >= 10;
}

/* Sums 0, 1, 2, ... until the sum reaches 10 (0+1+2+3+4): 5 calls. */
SEC("xdp")
int loop(struct xdp_md *ctx)
{
	struct sum_ctx c = { .xdp = ctx };
	long n = bpf_loop(100, add_one, &c, 0);

	return n == 5 && c.sum == 10 ? XDP_PASS : XDP_DROP;
}

SEC("xdp")
int locked_count(struct xdp_md *ctx)
{
	__u32 k = 0;
	struct locked *l = bpf_map_lookup_elem(&counter, &k);

	if (!l)
		return XDP_ABORTED;
	bpf_spin_lock(&l->lock);
	l->n++;
	bpf_spin_unlock(&l->lock);
	return XDP_PASS;
}

/* A local view of struct ethhdr holding only the field it reads, at another offset than the
 * kernel's: CO-RE moves the load to byte 12. */
struct ethhdr___mine {
	__u16 h_proto;
} __attribute__((preserve_access_index));

SEC("xdp")
int core_proto(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr___mine *eth = data;

	if (data + 14 > end)
		return XDP_ABORTED;
	return eth->h_proto == __builtin_bswap16(0x0800) ? XDP_PASS : XDP_DROP;
}

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} events SEC(".maps");

/* A 4-byte record (the queue) followed by the frame's first 14 bytes. */
SEC("xdp")
int sample(struct xdp_md *ctx)
{
	__u32 q = ctx->rx_queue_index;
	long r = bpf_perf_event_output(ctx, &events, BPF_F_CURRENT_CPU | (14ULL << 32), &q, sizeof(q));

	return r == 0 ? XDP_PASS : XDP_DROP;
}

SEC("xdp")
int fib(struct xdp_md *ctx)
{
	struct bpf_fib_lookup p = {};
	long rc;

	p.family = 2;
	p.ifindex = ctx->ingress_ifindex;
	p.ipv4_dst = __builtin_bswap32(0x0a000002);
	rc = bpf_fib_lookup(ctx, &p, sizeof(p), 0);
	if (rc == BPF_FIB_LKUP_RET_NOT_FWDED)
		return XDP_DROP;
	if (rc != 0)
		return XDP_ABORTED;
	return bpf_redirect(p.ifindex, 0);
}

char _license[] SEC("license") = "GPL";
