// SPDX-License-Identifier: GPL-2.0
/* The kernel types XDP programs read, as the UAPI headers define them: compiled with -g, the
 * object's BTF is what onic-bpf resolves CO-RE relocations against when it is given no kernel
 * BTF (bpf/src/co_re.rs). Nothing here runs. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <linux/icmpv6.h>

/* linux/icmp.h reaches into glibc, which has no BPF target: its header, as the UAPI lays it out. */
struct icmphdr {
	__u8 type;
	__u8 code;
	__sum16 checksum;
	union {
		struct {
			__be16 id;
			__be16 sequence;
		} echo;
		__be32 gateway;
		struct {
			__be16 __unused;
			__be16 mtu;
		} frag;
		__u8 reserved[4];
	} un;
};

/* Not in the UAPI headers; the kernel's own definition (include/linux/if_vlan.h). */
struct vlan_hdr {
	__be16 h_vlan_TCI;
	__be16 h_vlan_encapsulated_proto;
};

struct core_types {
	struct xdp_md xdp_md;
	struct ethhdr ethhdr;
	struct vlan_hdr vlan_hdr;
	struct iphdr iphdr;
	struct ipv6hdr ipv6hdr;
	struct tcphdr tcphdr;
	struct udphdr udphdr;
	struct icmphdr icmphdr;
	struct icmp6hdr icmp6hdr;
	struct bpf_fib_lookup bpf_fib_lookup;
	struct bpf_cpumap_val bpf_cpumap_val;
	struct bpf_devmap_val bpf_devmap_val;
	enum xdp_action xdp_action;
};

struct core_types core_types;
