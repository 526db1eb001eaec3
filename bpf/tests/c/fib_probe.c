// SPDX-License-Identifier: GPL-2.0
/* bpf_fib_lookup with the inputs the loader sets: entry 0 of args gives the interface (~0: the
 * ingress interface), the flags, the table (with BPF_FIB_LOOKUP_TBID) and tot_len; the lookup
 * for 10.0.0.2 is made in entry 0 of result, its return code first, then the parameters as the
 * helper left them. Every frame is passed. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct fib_args {
	__u32 ifindex;
	__u32 flags;
	__u32 tbid;
	__u32 tot_len;
};

struct fib_out {
	__s64 rc;
	struct bpf_fib_lookup p;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct fib_args);
	__uint(max_entries, 1);
} args SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct fib_out);
	__uint(max_entries, 1);
} result SEC(".maps");

SEC("xdp")
int fib_probe(struct xdp_md *ctx)
{
	__u32 k = 0;
	struct fib_args *a = bpf_map_lookup_elem(&args, &k);
	struct fib_out *o = bpf_map_lookup_elem(&result, &k);

	if (!a || !o)
		return XDP_ABORTED;
	__builtin_memset(&o->p, 0, sizeof(o->p));
	o->p.family = 2;
	o->p.ifindex = a->ifindex == ~0U ? ctx->ingress_ifindex : a->ifindex;
	o->p.ipv4_dst = __builtin_bswap32(0x0a000002);
	o->p.tot_len = a->tot_len;
	o->p.tbid = a->tbid;
	o->rc = bpf_fib_lookup(ctx, &o->p, sizeof(o->p), a->flags);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
