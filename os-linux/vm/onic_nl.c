// SPDX-License-Identifier: GPL-2.0
/*
 * A small client of the kernel's "netdev" generic netlink family, for the VM test (Debian 12
 * packages neither ynl nor a library that knows the family). It speaks raw netlink sockets and
 * prints one line per object, "key value" pairs, for the test's shell to read:
 *
 *   onic_nl dev <ifname>      dev-get:        "dev ifindex N xdp-features 0xX"
 *   onic_nl queues <ifname>   queue-get dump: "queue rx|tx ID napi N" (N = 0: no NAPI set)
 *   onic_nl napis <ifname>    napi-get dump:  "napi ID irq N" (N = -1: no IRQ set)
 *   onic_nl qstats <ifname>   qstats-get:     "qstats dev rx-packets N ..." (the netdev's sum),
 *                             then "qstats rx|tx ID packets N bytes N [alloc-fail N]" per queue
 *   onic_nl pools <ifname>    page-pool-get dump, the pools bound to the interface:
 *                             "pool ID ifindex N napi N inflight N detached 0|1"
 *   onic_nl pools-if <index>  the same for an interface index (one that may be gone)
 *
 * Exit status: 0, 1 on an error (printed), 2 when the kernel has no "netdev" family (printed as
 * "netdev family absent"). Counters the kernel leaves out are printed as -1.
 *
 * Built statically without libraries: gcc -O2 -static onic_nl.c
 */
#include <errno.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include <linux/genetlink.h>
#include <linux/netlink.h>

/* The family's numbers (include/uapi/linux/netdev.h of 6.12; stable ABI), written out because
 * Debian 12's libc headers predate most of them. */
#define NETDEV_CMD_DEV_GET 1
#define NETDEV_CMD_PAGE_POOL_GET 5
#define NETDEV_CMD_QUEUE_GET 10
#define NETDEV_CMD_NAPI_GET 11
#define NETDEV_CMD_QSTATS_GET 12

#define NETDEV_A_DEV_IFINDEX 1
#define NETDEV_A_DEV_XDP_FEATURES 3

#define NETDEV_A_PAGE_POOL_ID 1
#define NETDEV_A_PAGE_POOL_IFINDEX 2
#define NETDEV_A_PAGE_POOL_NAPI_ID 3
#define NETDEV_A_PAGE_POOL_INFLIGHT 4
#define NETDEV_A_PAGE_POOL_DETACH_TIME 6

#define NETDEV_A_NAPI_IFINDEX 1
#define NETDEV_A_NAPI_ID 2
#define NETDEV_A_NAPI_IRQ 3

#define NETDEV_A_QUEUE_ID 1
#define NETDEV_A_QUEUE_IFINDEX 2
#define NETDEV_A_QUEUE_TYPE 3
#define NETDEV_A_QUEUE_NAPI_ID 4

#define NETDEV_A_QSTATS_IFINDEX 1
#define NETDEV_A_QSTATS_QUEUE_TYPE 2
#define NETDEV_A_QSTATS_QUEUE_ID 3
#define NETDEV_A_QSTATS_SCOPE 4
#define NETDEV_A_QSTATS_RX_PACKETS 8
#define NETDEV_A_QSTATS_RX_BYTES 9
#define NETDEV_A_QSTATS_TX_PACKETS 10
#define NETDEV_A_QSTATS_TX_BYTES 11
#define NETDEV_A_QSTATS_RX_ALLOC_FAIL 12
#define NETDEV_QSTATS_SCOPE_QUEUE 1

#define NETDEV_QUEUE_TYPE_RX 0

#define MAX_ATTR 40
#define BUF_LEN 65536

static int sock = -1;
static uint32_t seq;

struct req {
	struct nlmsghdr nh;
	struct genlmsghdr gh;
	char attrs[64];
};

static void put_attr(struct req *r, uint16_t type, const void *data, uint16_t len)
{
	struct nlattr *a = (struct nlattr *)((char *)r + NLMSG_ALIGN(r->nh.nlmsg_len));

	a->nla_type = type;
	a->nla_len = NLA_HDRLEN + len;
	memcpy((char *)a + NLA_HDRLEN, data, len);
	r->nh.nlmsg_len = NLMSG_ALIGN(r->nh.nlmsg_len) + NLA_ALIGN(a->nla_len);
}

static void put_u32(struct req *r, uint16_t type, uint32_t v)
{
	put_attr(r, type, &v, sizeof(v));
}

static void start(struct req *r, uint16_t family, uint8_t cmd, uint16_t flags)
{
	memset(r, 0, sizeof(*r));
	r->nh.nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN);
	r->nh.nlmsg_type = family;
	r->nh.nlmsg_flags = NLM_F_REQUEST | flags;
	r->nh.nlmsg_seq = ++seq;
	r->gh.cmd = cmd;
	r->gh.version = 1;
}

/* The attributes of one generic netlink message, by type (later ones win). */
static void parse(const struct nlmsghdr *nh, const struct nlattr **tb)
{
	const char *p = (const char *)NLMSG_DATA(nh) + GENL_HDRLEN;
	const char *end = (const char *)nh + nh->nlmsg_len;

	memset(tb, 0, sizeof(*tb) * (MAX_ATTR + 1));
	while (p + NLA_HDRLEN <= end) {
		const struct nlattr *a = (const struct nlattr *)p;
		uint16_t type = a->nla_type & NLA_TYPE_MASK;

		if (a->nla_len < NLA_HDRLEN || p + a->nla_len > end)
			break;
		if (type <= MAX_ATTR)
			tb[type] = a;
		p += NLA_ALIGN(a->nla_len);
	}
}

/* A u32 or u64 attribute (the family's "uint" is either), or -1 when absent. */
static long long uint_attr(const struct nlattr *a)
{
	uint32_t v32;
	uint64_t v64;

	if (!a)
		return -1;
	if (a->nla_len == NLA_HDRLEN + 4) {
		memcpy(&v32, (const char *)a + NLA_HDRLEN, 4);
		return v32;
	}
	if (a->nla_len == NLA_HDRLEN + 8) {
		memcpy(&v64, (const char *)a + NLA_HDRLEN, 8);
		return (long long)v64;
	}
	return -1;
}

typedef void (*handler)(const struct nlmsghdr *nh, void *arg);

/* Sends r and hands every reply message to h, until the dump's DONE or a do's answer. Returns
 * 0 or a negative errno from the kernel. */
static int talk(struct req *r, handler h, void *arg)
{
	static char buf[BUF_LEN];
	int dump = r->nh.nlmsg_flags & NLM_F_DUMP;

	if (send(sock, r, r->nh.nlmsg_len, 0) < 0) {
		perror("send");
		exit(1);
	}
	for (;;) {
		ssize_t n = recv(sock, buf, sizeof(buf), 0);
		struct nlmsghdr *nh;

		if (n < 0) {
			perror("recv");
			exit(1);
		}
		for (nh = (struct nlmsghdr *)buf; NLMSG_OK(nh, n); nh = NLMSG_NEXT(nh, n)) {
			if (nh->nlmsg_seq != r->nh.nlmsg_seq)
				continue;
			if (nh->nlmsg_type == NLMSG_DONE)
				return 0;
			if (nh->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(nh);

				if (e->error || !dump)
					return e->error;
				continue;
			}
			h(nh, arg);
			if (!dump)
				return 0;
		}
	}
}

static void family_reply(const struct nlmsghdr *nh, void *arg)
{
	const struct nlattr *tb[MAX_ATTR + 1];

	parse(nh, tb);
	if (tb[CTRL_ATTR_FAMILY_ID])
		memcpy(arg, (const char *)tb[CTRL_ATTR_FAMILY_ID] + NLA_HDRLEN, sizeof(uint16_t));
}

static uint16_t netdev_family(void)
{
	struct req r;
	uint16_t id = 0;
	int err;

	start(&r, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 0);
	put_attr(&r, CTRL_ATTR_FAMILY_NAME, "netdev", sizeof("netdev"));
	err = talk(&r, family_reply, &id);
	if (err == -ENOENT || (!err && !id)) {
		printf("netdev family absent\n");
		exit(2);
	}
	if (err) {
		fprintf(stderr, "family lookup: %s\n", strerror(-err));
		exit(1);
	}
	return id;
}

static void dev_reply(const struct nlmsghdr *nh, void *arg)
{
	const struct nlattr *tb[MAX_ATTR + 1];

	parse(nh, tb);
	printf("dev ifindex %lld xdp-features 0x%llx\n", uint_attr(tb[NETDEV_A_DEV_IFINDEX]),
	       (unsigned long long)uint_attr(tb[NETDEV_A_DEV_XDP_FEATURES]));
}

static const char *qtype(long long t)
{
	return t == NETDEV_QUEUE_TYPE_RX ? "rx" : "tx";
}

static void queue_reply(const struct nlmsghdr *nh, void *arg)
{
	const struct nlattr *tb[MAX_ATTR + 1];
	long long napi;

	parse(nh, tb);
	napi = uint_attr(tb[NETDEV_A_QUEUE_NAPI_ID]);
	printf("queue %s %lld napi %lld\n", qtype(uint_attr(tb[NETDEV_A_QUEUE_TYPE])),
	       uint_attr(tb[NETDEV_A_QUEUE_ID]), napi < 0 ? 0 : napi);
}

static void napi_reply(const struct nlmsghdr *nh, void *arg)
{
	const struct nlattr *tb[MAX_ATTR + 1];

	parse(nh, tb);
	printf("napi %lld irq %lld\n", uint_attr(tb[NETDEV_A_NAPI_ID]), uint_attr(tb[NETDEV_A_NAPI_IRQ]));
}

static void qstats_reply(const struct nlmsghdr *nh, void *arg)
{
	const struct nlattr *tb[MAX_ATTR + 1];

	parse(nh, tb);
	if (!tb[NETDEV_A_QSTATS_QUEUE_TYPE]) {
		printf("qstats dev rx-packets %lld rx-bytes %lld rx-alloc-fail %lld tx-packets %lld tx-bytes %lld\n",
		       uint_attr(tb[NETDEV_A_QSTATS_RX_PACKETS]), uint_attr(tb[NETDEV_A_QSTATS_RX_BYTES]),
		       uint_attr(tb[NETDEV_A_QSTATS_RX_ALLOC_FAIL]), uint_attr(tb[NETDEV_A_QSTATS_TX_PACKETS]),
		       uint_attr(tb[NETDEV_A_QSTATS_TX_BYTES]));
		return;
	}
	if (uint_attr(tb[NETDEV_A_QSTATS_QUEUE_TYPE]) == NETDEV_QUEUE_TYPE_RX)
		printf("qstats rx %lld packets %lld bytes %lld alloc-fail %lld\n",
		       uint_attr(tb[NETDEV_A_QSTATS_QUEUE_ID]), uint_attr(tb[NETDEV_A_QSTATS_RX_PACKETS]),
		       uint_attr(tb[NETDEV_A_QSTATS_RX_BYTES]), uint_attr(tb[NETDEV_A_QSTATS_RX_ALLOC_FAIL]));
	else
		printf("qstats tx %lld packets %lld bytes %lld\n", uint_attr(tb[NETDEV_A_QSTATS_QUEUE_ID]),
		       uint_attr(tb[NETDEV_A_QSTATS_TX_PACKETS]), uint_attr(tb[NETDEV_A_QSTATS_TX_BYTES]));
}

static void pool_reply(const struct nlmsghdr *nh, void *arg)
{
	const struct nlattr *tb[MAX_ATTR + 1];
	long long ifindex, napi;

	parse(nh, tb);
	ifindex = uint_attr(tb[NETDEV_A_PAGE_POOL_IFINDEX]);
	if (ifindex != *(long long *)arg)
		return;
	napi = uint_attr(tb[NETDEV_A_PAGE_POOL_NAPI_ID]);
	printf("pool %lld ifindex %lld napi %lld inflight %lld detached %d\n",
	       uint_attr(tb[NETDEV_A_PAGE_POOL_ID]), ifindex, napi < 0 ? 0 : napi,
	       uint_attr(tb[NETDEV_A_PAGE_POOL_INFLIGHT]), tb[NETDEV_A_PAGE_POOL_DETACH_TIME] != NULL);
}

static void check(int err, const char *what)
{
	if (err) {
		fprintf(stderr, "%s: %s\n", what, strerror(-err));
		exit(1);
	}
}

static uint32_t ifindex_of(const char *name)
{
	unsigned int i = if_nametoindex(name);

	if (!i) {
		fprintf(stderr, "%s: no such interface\n", name);
		exit(1);
	}
	return i;
}

int main(int argc, char **argv)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	struct req r;
	uint16_t fam;
	uint32_t ifindex;
	long long want;

	if (argc != 3) {
		fprintf(stderr, "usage: onic_nl dev|queues|napis|qstats|pools <ifname> | pools-if <index>\n");
		return 1;
	}
	sock = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	if (sock < 0 || bind(sock, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("netlink socket");
		return 1;
	}
	fam = netdev_family();
	ifindex = strcmp(argv[1], "pools-if") ? ifindex_of(argv[2]) : (uint32_t)strtoul(argv[2], NULL, 0);
	if (!strcmp(argv[1], "dev")) {
		start(&r, fam, NETDEV_CMD_DEV_GET, 0);
		put_u32(&r, NETDEV_A_DEV_IFINDEX, ifindex);
		check(talk(&r, dev_reply, NULL), "dev-get");
	} else if (!strcmp(argv[1], "queues")) {
		start(&r, fam, NETDEV_CMD_QUEUE_GET, NLM_F_DUMP);
		put_u32(&r, NETDEV_A_QUEUE_IFINDEX, ifindex);
		check(talk(&r, queue_reply, NULL), "queue-get");
	} else if (!strcmp(argv[1], "napis")) {
		start(&r, fam, NETDEV_CMD_NAPI_GET, NLM_F_DUMP);
		put_u32(&r, NETDEV_A_NAPI_IFINDEX, ifindex);
		check(talk(&r, napi_reply, NULL), "napi-get");
	} else if (!strcmp(argv[1], "qstats")) {
		start(&r, fam, NETDEV_CMD_QSTATS_GET, NLM_F_DUMP);
		put_u32(&r, NETDEV_A_QSTATS_IFINDEX, ifindex);
		check(talk(&r, qstats_reply, NULL), "qstats-get");
		start(&r, fam, NETDEV_CMD_QSTATS_GET, NLM_F_DUMP);
		put_u32(&r, NETDEV_A_QSTATS_IFINDEX, ifindex);
		put_u32(&r, NETDEV_A_QSTATS_SCOPE, NETDEV_QSTATS_SCOPE_QUEUE);
		check(talk(&r, qstats_reply, NULL), "qstats-get (queues)");
	} else if (!strcmp(argv[1], "pools") || !strcmp(argv[1], "pools-if")) {
		want = ifindex;
		start(&r, fam, NETDEV_CMD_PAGE_POOL_GET, NLM_F_DUMP);
		check(talk(&r, pool_reply, &want), "page-pool-get");
	} else {
		fprintf(stderr, "unknown command %s\n", argv[1]);
		return 1;
	}
	return 0;
}
