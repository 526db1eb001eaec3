// SPDX-License-Identifier: GPL-2.0
/* Counts frames and bytes per IPv4 flow in a hash map and passes everything (the C twin of
 * `onic run --xdp count`). The key is (source, destination, protocol, source port, destination
 * port); ports are the 4 bytes after the IPv4 header, 0 when the frame ends before them.
 * Frames that are not IPv4 (or too short for an IPv4 header's addresses) count under the
 * all-zero key. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct flow {
	__u32 saddr;
	__u32 daddr;
	__u8 proto;
	__u8 pad;
	__u16 sport;
	__u16 dport;
	__u16 pad2;
};

struct counts {
	__u64 packets;
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct flow);
	__type(value, struct counts);
} flows SEC(".maps");

static __always_inline __u16 port_at(unsigned char *p, void *end)
{
	if ((void *)(p + 2) > end)
		return 0;
	return ((__u16)p[0] << 8) | p[1];
}

SEC("xdp")
int xdp_count(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct flow key = {};
	struct counts *c, init = {};
	unsigned char *l4;

	if ((void *)(ip + 1) <= end && eth->h_proto == bpf_htons(ETH_P_IP)) {
		key.saddr = ip->saddr;
		key.daddr = ip->daddr;
		key.proto = ip->protocol;
		l4 = (unsigned char *)ip + ip->ihl * 4;
		key.sport = port_at(l4, end);
		key.dport = port_at(l4 + 2, end);
	}
	c = bpf_map_lookup_elem(&flows, &key);
	if (!c) {
		bpf_map_update_elem(&flows, &key, &init, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&flows, &key);
		if (!c)
			return XDP_PASS;
	}
	__sync_fetch_and_add(&c->packets, 1);
	__sync_fetch_and_add(&c->bytes, end - data);
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
