// SPDX-License-Identifier: GPL-2.0
/* Broadcast redirects through a devmap the loader fills: to every entry's interface, or to
 * every one but the ingress interface. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
	__uint(max_entries, 4);
} ports SEC(".maps");

SEC("xdp")
int to_every_port(struct xdp_md *ctx)
{
	return bpf_redirect_map(&ports, 0, BPF_F_BROADCAST);
}

SEC("xdp")
int to_other_ports(struct xdp_md *ctx)
{
	return bpf_redirect_map(&ports, 0, BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS);
}

char _license[] SEC("license") = "GPL";
