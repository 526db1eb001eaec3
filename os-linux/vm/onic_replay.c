// SPDX-License-Identifier: GPL-2.0
/*
 * The kernel half of "the same program everywhere": replays a capture through an XDP object
 * attached to a netdev and records what came out, in the forms `onic run --xdp-obj` writes, so
 * that the two can be compared frame for frame.
 *
 *   onic_replay run <object> <program> <xdp-if> <send-if> <pcap> <out-dir> [MAP:KEY=VALUE ...]
 *     Loads <program> of <object> with libbpf (setting the map entries given: decimal numbers,
 *     stored little-endian in the map's key and value sizes), attaches it natively to <xdp-if>,
 *     sends every frame of <pcap> out of <send-if> (whose wire leads to <xdp-if>: the model's
 *     cable, or a veth pair), and records until one second passes without a frame:
 *       <out-dir>/pass.pcap       frames <xdp-if> received (XDP_PASS: the stack's packet taps);
 *       <out-dir>/port0-out.pcap  frames that arrived at <send-if> (what <xdp-if>'s port sent:
 *                                 XDP_TX, or redirects to it);
 *       <out-dir>/maps.txt        every map entry, "name key-hex value-hex", sorted;
 *     then prints "sent=N pass=N port0-out=N" and detaches.
 *   onic_replay pause <send-if> <count>
 *     Sends <count> IEEE 802.3x pause frames (MAC control, opcode 1, to 01:80:c2:00:00:01, pause
 *     time 0) out of <send-if>, 60 bytes each (64 on the wire), and prints "sent=N": the MAC
 *     counters of the sending and the receiving port must count them.
 *   onic_replay digest <pcap>
 *     Prints one "length fnv64" line per frame, sorted: the order-free form of a capture (RSS
 *     spreads frames over queues, so arrival order is not part of the comparison).
 *
 * Built statically against libbpf (like onic_xdp_hash): gcc -O2 -static onic_replay.c -lbpf -lelf -lz
 */
#include <errno.h>
#include <net/if.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <linux/if_packet.h>

#define MAX_FRAME 2048
#define QUIET_MS 1000

struct frame {
	uint32_t sec, usec, len;
	unsigned char *data;
};

struct capture {
	struct frame *f;
	size_t n, cap;
};

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void add(struct capture *c, const unsigned char *d, uint32_t len, uint32_t sec, uint32_t usec)
{
	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 256;
		c->f = realloc(c->f, c->cap * sizeof(*c->f));
		if (!c->f)
			die("realloc");
	}
	c->f[c->n].data = malloc(len ? len : 1);
	if (!c->f[c->n].data)
		die("malloc");
	memcpy(c->f[c->n].data, d, len);
	c->f[c->n].len = len;
	c->f[c->n].sec = sec;
	c->f[c->n].usec = usec;
	c->n++;
}

static uint32_t swap32(uint32_t v, int swap)
{
	return swap ? __builtin_bswap32(v) : v;
}

/* Reads a classic pcap file (either byte order, micro- or nanosecond stamps). */
static void read_pcap(const char *path, struct capture *c)
{
	unsigned char hdr[24], rec[16], buf[65536];
	uint32_t magic, caplen;
	int swap;
	FILE *fp = fopen(path, "rb");

	if (!fp || fread(hdr, 1, 24, fp) != 24)
		die(path);
	memcpy(&magic, hdr, 4);
	swap = magic == 0xd4c3b2a1 || magic == 0x4d3cb2a1;
	if (!swap && magic != 0xa1b2c3d4 && magic != 0xa1b23c4d) {
		fprintf(stderr, "%s: not a pcap file\n", path);
		exit(1);
	}
	while (fread(rec, 1, 16, fp) == 16) {
		uint32_t sec, usec;

		memcpy(&sec, rec, 4);
		memcpy(&usec, rec + 4, 4);
		memcpy(&caplen, rec + 8, 4);
		caplen = swap32(caplen, swap);
		if (caplen > sizeof(buf) || fread(buf, 1, caplen, fp) != caplen) {
			fprintf(stderr, "%s: truncated record\n", path);
			exit(1);
		}
		add(c, buf, caplen, swap32(sec, swap), swap32(usec, swap));
	}
	fclose(fp);
}

static void write_pcap(const char *path, const struct capture *c)
{
	uint32_t h[6] = { 0xa1b2c3d4, 0x00040002, 0, 0, 65535, 1 };
	FILE *fp = fopen(path, "wb");
	size_t i;

	if (!fp || fwrite(h, 4, 6, fp) != 6)
		die(path);
	for (i = 0; i < c->n; i++) {
		uint32_t r[4] = { c->f[i].sec, c->f[i].usec, c->f[i].len, c->f[i].len };

		if (fwrite(r, 4, 4, fp) != 4 || fwrite(c->f[i].data, 1, c->f[i].len, fp) != c->f[i].len)
			die(path);
	}
	fclose(fp);
}

static uint64_t fnv64(const unsigned char *d, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	while (n--) {
		h ^= *d++;
		h *= 0x100000001b3ULL;
	}
	return h;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int digest(const char *path)
{
	struct capture c = { 0 };
	char **lines;
	size_t i;

	read_pcap(path, &c);
	lines = calloc(c.n + 1, sizeof(*lines));
	for (i = 0; i < c.n; i++) {
		lines[i] = malloc(48);
		snprintf(lines[i], 48, "%u %016llx", c.f[i].len,
			 (unsigned long long)fnv64(c.f[i].data, c.f[i].len));
	}
	qsort(lines, c.n, sizeof(*lines), cmp_str);
	for (i = 0; i < c.n; i++)
		puts(lines[i]);
	return 0;
}

static int packet_socket(const char *ifname, int *ifindex)
{
	struct sockaddr_ll sll = { 0 };
	int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_P_ALL));
	int rcvbuf = 16 << 20;

	if (fd < 0)
		die("socket(AF_PACKET)");
	/* Room for the whole capture even when this process is not scheduled for a while (the
	 * socket would drop what does not fit, and the comparison would miss frames). */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)))
		die("SO_RCVBUFFORCE");
	*ifindex = if_nametoindex(ifname);
	if (!*ifindex)
		die(ifname);
	sll.sll_family = AF_PACKET;
	sll.sll_protocol = htons(ETH_P_ALL);
	sll.sll_ifindex = *ifindex;
	if (bind(fd, (struct sockaddr *)&sll, sizeof(sll)))
		die("bind");
	return fd;
}

/* Takes every frame waiting on `fd` that was not sent by this host; returns how many. */
static size_t drain(int fd, struct capture *c)
{
	unsigned char buf[MAX_FRAME];
	struct sockaddr_ll from;
	socklen_t fl = sizeof(from);
	struct timespec now;
	size_t got = 0;
	ssize_t n;

	while ((n = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl)) >= 0) {
		fl = sizeof(from);
		if (from.sll_pkttype == PACKET_OUTGOING)
			continue;
		clock_gettime(CLOCK_REALTIME, &now);
		add(c, buf, (uint32_t)n, (uint32_t)now.tv_sec, (uint32_t)(now.tv_nsec / 1000));
		got++;
	}
	return got;
}

static void set_entry(struct bpf_object *obj, const char *spec)
{
	char name[128];
	unsigned long long k, v;
	unsigned char key[8] = { 0 }, val[8] = { 0 };
	struct bpf_map *m;

	if (sscanf(spec, "%127[^:]:%llu=%llu", name, &k, &v) != 3) {
		fprintf(stderr, "%s: expected MAP:KEY=VALUE\n", spec);
		exit(2);
	}
	m = bpf_object__find_map_by_name(obj, name);
	if (!m || bpf_map__key_size(m) > 8 || bpf_map__value_size(m) > 8) {
		fprintf(stderr, "%s: no map %s with keys and values of at most 8 bytes\n", spec, name);
		exit(2);
	}
	memcpy(key, &k, sizeof(key));
	memcpy(val, &v, sizeof(val));
	if (bpf_map_update_elem(bpf_map__fd(m), key, val, BPF_ANY))
		die(spec);
}

static char *hex(const unsigned char *d, size_t n)
{
	char *s = malloc(2 * n + 1);
	size_t i;

	for (i = 0; i < n; i++)
		sprintf(s + 2 * i, "%02x", d[i]);
	s[2 * n] = 0;
	return s;
}

/* Writes every entry of every map, "name key value" (per-CPU maps: the copies one after the
 * other, each padded to 8 bytes as the syscall returns them), sorted. */
static void dump_maps(struct bpf_object *obj, const char *path)
{
	char **lines = NULL;
	size_t n = 0, cap = 0, i;
	struct bpf_map *m;
	FILE *fp;

	bpf_object__for_each_map(m, obj) {
		unsigned int ks = bpf_map__key_size(m), vs = bpf_map__value_size(m);
		enum bpf_map_type t = bpf_map__type(m);
		int percpu = t == BPF_MAP_TYPE_PERCPU_ARRAY || t == BPF_MAP_TYPE_PERCPU_HASH ||
			     t == BPF_MAP_TYPE_LRU_PERCPU_HASH;
		size_t vlen = percpu ? (size_t)((vs + 7) & ~7u) * libbpf_num_possible_cpus() : vs;
		unsigned char *key = calloc(1, ks), *next = calloc(1, ks), *val = calloc(1, vlen);
		int fd = bpf_map__fd(m), first = 1;

		while (!bpf_map_get_next_key(fd, first ? NULL : key, next)) {
			char *kh, *vh;

			first = 0;
			memcpy(key, next, ks);
			if (bpf_map_lookup_elem(fd, key, val))
				continue;
			kh = hex(key, ks);
			vh = hex(val, vlen);
			if (n == cap) {
				cap = cap ? 2 * cap : 64;
				lines = realloc(lines, cap * sizeof(*lines));
			}
			lines[n] = malloc(strlen(bpf_map__name(m)) + strlen(kh) + strlen(vh) + 3);
			sprintf(lines[n++], "%s %s %s", bpf_map__name(m), kh, vh);
			free(kh);
			free(vh);
		}
		free(key);
		free(next);
		free(val);
	}
	qsort(lines, n, sizeof(*lines), cmp_str);
	fp = fopen(path, "w");
	if (!fp)
		die(path);
	for (i = 0; i < n; i++)
		fprintf(fp, "%s\n", lines[i]);
	fclose(fp);
}

static struct bpf_object *load(const char *path, const char *prog_name, int nmaps, char **maps,
			       int *prog_fd)
{
	struct bpf_object *obj = bpf_object__open_file(path, NULL);
	struct bpf_program *prog;
	int i;

	if (!obj) {
		fprintf(stderr, "cannot open %s\n", path);
		exit(1);
	}
	prog = bpf_object__find_program_by_name(obj, prog_name);
	if (!prog) {
		fprintf(stderr, "%s: no program %s\n", path, prog_name);
		exit(1);
	}
	/* Only the chosen program is loaded (objects may hold several). */
	bpf_object__for_each_program(prog, obj)
		bpf_program__set_autoload(prog, !strcmp(bpf_program__name(prog), prog_name));
	if (bpf_object__load(obj)) {
		fprintf(stderr, "%s: load failed\n", path);
		exit(1);
	}
	for (i = 0; i < nmaps; i++)
		set_entry(obj, maps[i]);
	*prog_fd = bpf_program__fd(bpf_object__find_program_by_name(obj, prog_name));
	return obj;
}

static long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int run(int argc, char **argv)
{
	struct capture in = { 0 }, pass = { 0 }, out0 = { 0 };
	const char *mode = getenv("ONIC_XDP_MODE");
	__u32 flags = mode && !strcmp(mode, "skb") ? XDP_FLAGS_SKB_MODE : XDP_FLAGS_DRV_MODE;
	int prog_fd, xdp_ifindex, send_ifindex, rx, tx;
	struct bpf_object *obj;
	char path[4096];
	long quiet_since;
	size_t i;

	read_pcap(argv[4], &in);
	obj = load(argv[0], argv[1], argc - 6, argv + 6, &prog_fd);
	rx = packet_socket(argv[2], &xdp_ifindex);
	tx = packet_socket(argv[3], &send_ifindex);
	if (bpf_xdp_attach(xdp_ifindex, prog_fd, flags, NULL))
		die("bpf_xdp_attach");
	for (i = 0; i < in.n; i++) {
		struct sockaddr_ll to = { .sll_family = AF_PACKET, .sll_ifindex = send_ifindex,
					  .sll_halen = ETH_ALEN };

		memcpy(to.sll_addr, in.f[i].data, ETH_ALEN);
		while (sendto(tx, in.f[i].data, in.f[i].len, 0, (struct sockaddr *)&to, sizeof(to)) < 0) {
			if (errno != EAGAIN && errno != ENOBUFS)
				die("sendto");
			usleep(1000);
		}
		/* A little at a time, so no ring on the way overflows. */
		if (i % 8 == 7)
			usleep(4000);
		drain(rx, &pass);
		drain(tx, &out0);
	}
	quiet_since = now_ms();
	while (now_ms() - quiet_since < QUIET_MS) {
		struct pollfd p[2] = { { .fd = rx, .events = POLLIN }, { .fd = tx, .events = POLLIN } };

		poll(p, 2, 100);
		if (drain(rx, &pass) + drain(tx, &out0))
			quiet_since = now_ms();
	}
	bpf_xdp_detach(xdp_ifindex, flags, NULL);
	snprintf(path, sizeof(path), "%s/pass.pcap", argv[5]);
	write_pcap(path, &pass);
	snprintf(path, sizeof(path), "%s/port0-out.pcap", argv[5]);
	write_pcap(path, &out0);
	snprintf(path, sizeof(path), "%s/maps.txt", argv[5]);
	dump_maps(obj, path);
	printf("sent=%zu pass=%zu port0-out=%zu\n", in.n, pass.n, out0.n);
	bpf_object__close(obj);
	return 0;
}

static int pause_frames(const char *ifname, int count)
{
	unsigned char f[60] = { 0x01, 0x80, 0xc2, 0x00, 0x00, 0x01,	/* the MAC-control address */
				0x02, 0x00, 0x00, 0x00, 0x00, 0x01,	/* a local source */
				0x88, 0x08,				/* MAC control */
				0x00, 0x01,				/* PAUSE */
				0x00, 0x00 };				/* pause time 0 */
	int ifindex, fd = packet_socket(ifname, &ifindex);
	struct sockaddr_ll to = { .sll_family = AF_PACKET, .sll_ifindex = ifindex, .sll_halen = ETH_ALEN };
	int i;

	memcpy(to.sll_addr, f, ETH_ALEN);
	for (i = 0; i < count; i++) {
		while (sendto(fd, f, sizeof(f), 0, (struct sockaddr *)&to, sizeof(to)) < 0) {
			if (errno != EAGAIN && errno != ENOBUFS)
				die("sendto");
			usleep(1000);
		}
	}
	printf("sent=%d\n", count);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "pause"))
		return pause_frames(argv[2], atoi(argv[3]));
	if (argc == 3 && !strcmp(argv[1], "digest"))
		return digest(argv[2]);
	if (argc >= 8 && !strcmp(argv[1], "run"))
		return run(argc - 2, argv + 2);
	fprintf(stderr,
		"usage: %s run <object> <program> <xdp-if> <send-if> <pcap> <out-dir> [MAP:KEY=VALUE ...]\n"
		"       %s pause <send-if> <count>\n"
		"       %s digest <pcap>\n",
		argv[0], argv[0], argv[0]);
	return 2;
}
