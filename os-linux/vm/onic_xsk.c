// SPDX-License-Identifier: MIT
/*
 * onic_xsk: the VM test's AF_XDP program (os-linux/vm/xsk.sh, os-linux/vm/README.md).
 *
 * XSK side (on the port under test):
 *   onic_xsk rxdrop|txonly|l2fwd IF [options]   AF_XDP sockets on IF's queues
 *   onic_xsk probe IF [-q Q]                     exit 0: a zero-copy bind works, 3: it is refused
 * Peer side (AF_PACKET on the other port):
 *   onic_xsk peer-send|peer-echo|peer-recv IF -M XSK-MAC [options]
 *
 * Frames are IPv4/UDP to port 7777 (flow f: from 10.78.f/16, port 10000 + f, to 10.77.0.1)
 * whose every byte follows from (sequence, flow, length), so any receiver can compare them byte
 * for byte. The XSK side loads its own XDP filter (21 BPF instructions: UDP to 7777 is
 * redirected into the socket of its queue, everything else passes to the stack), so other
 * traffic on the same queues keeps flowing.
 *
 * Options: -q Q[,Q...] queues (one socket each), -m copy|zc|auto, -w 0|1 need_wakeup,
 * -U shared|each UMEM, -f frames per socket, -n frames (stop after; txonly: to send),
 * -t seconds (run this long, then exit 0), -d seconds (deadline: exit 2 if not done), -C check
 * received payloads, -S ms (swap in a fresh copy of the XDP filter this often), -l length
 * (0: lengths vary), -F flows, -g us (a pause after each burst of 16 frames, per socket),
 * -W window (peer-echo), -H bytes of UMEM headroom in every frame (the driver's RX buffers shrink
 * to fit; too many are refused at bind), -Z bytes per UMEM frame (chunk size: 4096, the default,
 * or 2048, DPDK's AF_XDP default, which the driver takes without headroom only).
 *
 * Output: "bound queues=N zerocopy=Z" once the sockets are bound (XSK side; "ready" on the
 * peer side once it listens), then one line of key=value counts. Exit codes: 0 done, 1 usage or setup error, 2 deadline,
 * 3 zero copy refused (probe), 4 the device went away, 5 frame accounting or payload errors.
 */
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <linux/if_packet.h>
#include <linux/if_xdp.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <xdp/xsk.h>

#define UDP_PORT 7777
#define MAX_QUEUES 8
#define BATCH 64
#define MAX_LEN 1514
#define MIN_LEN 60

enum frame_state { ST_FREE, ST_FILL, ST_USER, ST_TX };

struct opts {
	const char *mode, *ifname;
	unsigned queues[MAX_QUEUES], nq;
	uint16_t bind_mode; /* XDP_COPY, XDP_ZEROCOPY or 0 */
	int need_wakeup, shared_umem, check, len, flows, window;
	unsigned frames, count, gap_us, swap_ms, headroom, frame_size;
	double run_s, deadline_s;
	unsigned char peer_mac[6];
	int have_peer_mac;
};

/* One socket: its rings, its share of the UMEM's frames and what happened to them. */
struct sock {
	struct xsk_socket *xsk;
	struct xsk_ring_cons rx, comp;
	struct xsk_ring_prod tx, fill;
	unsigned queue, idx;
	uint64_t first;		/* address of its first frame */
	unsigned nframes;
	uint64_t *free;		/* user-owned frame addresses */
	unsigned nfree;
	unsigned char *state;
	uint64_t rx_n, tx_n, fill_n, comp_n, bad, state_err, next_seq, tx_full;
};

struct umem {
	struct xsk_umem *umem;
	void *area;
};

static struct opts O = { .bind_mode = XDP_COPY, .need_wakeup = 1, .shared_umem = 1, .frames = 4096,
			 .frame_size = XSK_UMEM__DEFAULT_FRAME_SIZE, .deadline_s = 60, .flows = 1, .window = 32, .nq = 1 };
static volatile sig_atomic_t stop_flag;
static unsigned char own_mac[6];
static int dev_gone;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static int die(const char *what, int err)
{
	fprintf(stderr, "onic_xsk: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

/* ---- the frames: every byte follows from (seq, flow, len) */

static unsigned frame_len(uint32_t seq)
{
	return O.len ? (unsigned)O.len : MIN_LEN + (seq * 97u) % (MAX_LEN - MIN_LEN + 1);
}

static uint16_t ip_csum(const unsigned char *h)
{
	uint32_t s = 0;

	for (int i = 0; i < 20; i += 2)
		s += (h[i] << 8) | h[i + 1];
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* Writes frame (seq, flow) of `len` bytes from `src` to `dst` into `p`. */
static void make_frame(unsigned char *p, unsigned len, uint32_t seq, uint16_t flow,
		       const unsigned char *dst, const unsigned char *src)
{
	unsigned char *ip = p + 14, *udp = p + 34, *pl = p + 42;

	memcpy(p, dst, 6);
	memcpy(p + 6, src, 6);
	p[12] = 0x08;
	p[13] = 0x00;
	memset(ip, 0, 20);
	ip[0] = 0x45;
	ip[2] = (len - 14) >> 8;
	ip[3] = (len - 14) & 0xff;
	ip[4] = (seq >> 8) & 0xff;
	ip[5] = seq & 0xff;
	ip[8] = 64;
	ip[9] = 17;
	/* the flow is in the source address too: the shell's UDP hash may cover the addresses only */
	memcpy(ip + 12, (unsigned char[]){ 10, 78, flow >> 8, flow & 0xff }, 4);
	memcpy(ip + 16, (unsigned char[]){ 10, 77, 0, 1 }, 4);
	uint16_t c = ip_csum(ip);
	ip[10] = c >> 8;
	ip[11] = c & 0xff;
	udp[0] = (10000 + flow) >> 8;
	udp[1] = (10000 + flow) & 0xff;
	udp[2] = UDP_PORT >> 8;
	udp[3] = UDP_PORT & 0xff;
	udp[4] = (len - 34) >> 8;
	udp[5] = (len - 34) & 0xff;
	udp[6] = udp[7] = 0;
	memcpy(pl, "OXSK", 4);
	for (int i = 0; i < 4; i++)
		pl[4 + i] = seq >> (24 - 8 * i);
	pl[8] = len >> 8;
	pl[9] = len & 0xff;
	pl[10] = flow >> 8;
	pl[11] = flow & 0xff;
	for (unsigned i = 54; i < len; i++)
		p[i] = (unsigned char)(seq * 7 + i * 13 + (seq >> 8));
}

/* The sequence number of a frame that looks like ours (-1 if not); *flow gets its flow. */
static long frame_seq(const unsigned char *p, unsigned len, uint16_t *flow)
{
	if (len < MIN_LEN || p[12] != 0x08 || p[13] != 0 || p[23] != 17 ||
	    ((p[36] << 8) | p[37]) != UDP_PORT || memcmp(p + 42, "OXSK", 4))
		return -1;
	*flow = (p[52] << 8) | p[53];
	return ((uint32_t)p[46] << 24) | (p[47] << 16) | (p[48] << 8) | p[49];
}

/* Is `p` exactly frame (its seq, its flow) from `src` to `dst`? */
static int frame_ok(const unsigned char *p, unsigned len, const unsigned char *dst,
		    const unsigned char *src, long *seq_out)
{
	static unsigned char want[MAX_LEN];
	uint16_t flow;
	long seq = frame_seq(p, len, &flow);

	*seq_out = seq;
	if (seq < 0 || len != ((p[50] << 8) | p[51]) || len > MAX_LEN)
		return 0;
	make_frame(want, len, (uint32_t)seq, flow, dst, src);
	return memcmp(want, p, len) == 0;
}

/* ---- the XDP filter: UDP/IPv4 (IHL 5) to UDP_PORT into the socket of its queue, else PASS */

/* One BPF instruction (the kernel's uapi has the encoding but none of the kernel's macros). */
#define INSN(c, d, s, o, i) ((struct bpf_insn){ .code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i) })
#define MOV_REG(d, s) INSN(BPF_ALU64 | BPF_MOV | BPF_X, d, s, 0, 0)
#define MOV_IMM(d, i) INSN(BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, i)
#define ADD_IMM(d, i) INSN(BPF_ALU64 | BPF_ADD | BPF_K, d, 0, 0, i)
#define LDX(sz, d, s, o) INSN(BPF_LDX | BPF_MEM | (sz), d, s, o, 0)
#define JNE_IMM(d, i, o) INSN(BPF_JMP | BPF_JNE | BPF_K, d, 0, o, i)
#define JGT_REG(d, s, o) INSN(BPF_JMP | BPF_JGT | BPF_X, d, s, o, 0)

/* Loads the filter; returns its fd. Instruction 20 is "pass": the jumps' offsets lead there. */
static int load_filter(int map_fd)
{
	struct bpf_insn prog[] = {
		MOV_REG(6, 1),
		LDX(BPF_W, 2, 1, offsetof(struct xdp_md, data)),
		LDX(BPF_W, 3, 1, offsetof(struct xdp_md, data_end)),
		MOV_REG(4, 2),
		ADD_IMM(4, 38),
		JGT_REG(4, 3, 14), /* shorter than Ethernet + IPv4 + UDP ports */
		LDX(BPF_H, 4, 2, 12),
		JNE_IMM(4, htons(ETH_P_IP), 12),
		LDX(BPF_B, 4, 2, 14),
		JNE_IMM(4, 0x45, 10),
		LDX(BPF_B, 4, 2, 23),
		JNE_IMM(4, 17, 8),
		LDX(BPF_H, 4, 2, 36),
		JNE_IMM(4, htons(UDP_PORT), 6),
		LDX(BPF_W, 2, 6, offsetof(struct xdp_md, rx_queue_index)),
		INSN(BPF_LD | BPF_DW | BPF_IMM, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),
		INSN(0, 0, 0, 0, 0),
		MOV_IMM(3, XDP_PASS),
		INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_redirect_map),
		INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
		MOV_IMM(0, XDP_PASS),
		INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
	};
	char log[8192] = "";
	LIBBPF_OPTS(bpf_prog_load_opts, po, .log_buf = log, .log_size = sizeof(log));
	int fd = bpf_prog_load(BPF_PROG_TYPE_XDP, "onic_xsk", "GPL", prog,
			       sizeof(prog) / sizeof(prog[0]), &po);

	if (fd < 0) {
		fprintf(stderr, "%s", log);
		die("load the XDP filter", fd);
	}
	return fd;
}

/* ---- the XSK side */

static struct umem umems[MAX_QUEUES];
static struct sock socks[MAX_QUEUES];

static unsigned frame_index(const struct sock *s, uint64_t addr)
{
	return (unsigned)((xsk_umem__extract_addr(addr) - s->first) / O.frame_size);
}

/* Moves a frame of `s` from state `from` to `to`; a frame in any other state is counted as a
 * state error (the kernel handed back a frame it did not have, or one twice). */
static int frame_move(struct sock *s, uint64_t addr, int from, int to)
{
	unsigned i = frame_index(s, addr);

	if (xsk_umem__extract_addr(addr) < s->first || i >= s->nframes || s->state[i] != from) {
		s->state_err++;
		return -1;
	}
	s->state[i] = to;
	return 0;
}

/* Gives free frames to the fill ring (as many as fit). */
static void refill(struct sock *s)
{
	uint32_t idx, n = s->nfree < BATCH ? s->nfree : BATCH;

	if (strcmp(O.mode, "txonly") == 0 || !n)
		return;
	n = xsk_ring_prod__reserve(&s->fill, n, &idx);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t a = s->free[--s->nfree];

		frame_move(s, a, ST_FREE, ST_FILL);
		*xsk_ring_prod__fill_addr(&s->fill, idx + i) = a;
	}
	xsk_ring_prod__submit(&s->fill, n);
	s->fill_n += n;
}

/* After the bind: the fill ring as full as the free frames make it, and the driver woken to
 * take them (it found the ring empty when the bind started the queue), as an application does
 * before it expects traffic. */
static void prime(struct sock *s)
{
	uint32_t before;

	if (strcmp(O.mode, "txonly") == 0)
		return;
	do {
		before = s->nfree;
		refill(s);
	} while (s->nfree && s->nfree != before);
	if (!O.need_wakeup || xsk_ring_prod__needs_wakeup(&s->fill))
		recvfrom(xsk_socket__fd(s->xsk), NULL, 0, MSG_DONTWAIT, NULL, NULL);
}

static void kick_tx(struct sock *s)
{
	if (O.need_wakeup && !xsk_ring_prod__needs_wakeup(&s->tx))
		return;
	if (sendto(xsk_socket__fd(s->xsk), NULL, 0, MSG_DONTWAIT, NULL, 0) < 0 &&
	    errno == ENXIO)
		dev_gone = errno; /* unbound: the device is gone (ENETDOWN, a link down, passes) */
}

/* Takes TX completions back to the free list. */
static void reap(struct sock *s)
{
	uint32_t idx, n = xsk_ring_cons__peek(&s->comp, BATCH, &idx);

	for (uint32_t i = 0; i < n; i++) {
		uint64_t a = *xsk_ring_cons__comp_addr(&s->comp, idx + i);

		if (frame_move(s, a, ST_TX, ST_FREE) == 0)
			s->free[s->nfree++] = xsk_umem__extract_addr(a);
	}
	xsk_ring_cons__release(&s->comp, n);
	s->comp_n += n;
}

/* Queues one frame for TX; 0 if the ring is full. */
static int tx_one(struct sock *s, uint64_t addr, unsigned len)
{
	uint32_t idx;

	if (xsk_ring_prod__reserve(&s->tx, 1, &idx) != 1)
		return 0;
	xsk_ring_prod__tx_desc(&s->tx, idx)->addr = addr;
	xsk_ring_prod__tx_desc(&s->tx, idx)->len = len;
	xsk_ring_prod__submit(&s->tx, 1);
	s->tx_n++;
	return 1;
}

/* One received frame: checked if asked, then dropped (back to the free list) or echoed. */
static void on_rx(struct sock *s, uint64_t addr, unsigned len)
{
	unsigned char *p = xsk_umem__get_data(umems[O.shared_umem ? 0 : s->idx].area, addr);
	unsigned char mac[6];
	long seq;

	if (frame_move(s, addr, ST_FILL, ST_USER))
		return;
	s->rx_n++;
	if (O.check && !frame_ok(p, len, own_mac, O.peer_mac, &seq))
		s->bad++;
	if (strcmp(O.mode, "l2fwd") == 0) {
		memcpy(mac, p, 6);
		memcpy(p, p + 6, 6);
		memcpy(p + 6, mac, 6);
		s->state[frame_index(s, addr)] = ST_TX;
		if (tx_one(s, addr, len))
			return;
		s->tx_full++; /* no room in the TX ring: the frame is dropped */
	}
	s->state[frame_index(s, addr)] = ST_FREE;
	s->free[s->nfree++] = xsk_umem__extract_addr(addr);
}

static void rx_batch(struct sock *s)
{
	uint32_t idx, n = xsk_ring_cons__peek(&s->rx, BATCH, &idx);

	for (uint32_t i = 0; i < n; i++) {
		const struct xdp_desc *d = xsk_ring_cons__rx_desc(&s->rx, idx + i);

		on_rx(s, d->addr, d->len);
	}
	xsk_ring_cons__release(&s->rx, n);
	if (n && strcmp(O.mode, "l2fwd") == 0)
		kick_tx(s);
}

/* txonly: queues up to a batch of frames (seq = i * queues + socket) while there is room. */
static void tx_batch(struct sock *s)
{
	unsigned sent = 0;

	/* with a gap, bursts of 16 frames: the receiving port's ring is not flooded */
	unsigned burst = O.gap_us ? 16 : BATCH;

	while (sent < burst && s->nfree && (!O.count || s->next_seq < O.count)) {
		uint64_t a = s->free[s->nfree - 1];
		uint32_t seq = (uint32_t)(s->next_seq * O.nq + s->idx);
		unsigned len = frame_len(seq);

		make_frame(xsk_umem__get_data(umems[O.shared_umem ? 0 : s->idx].area, a), len, seq,
			   (uint16_t)s->idx, O.peer_mac, own_mac);
		if (!tx_one(s, a, len))
			break;
		s->nfree--;
		frame_move(s, a, ST_FREE, ST_TX);
		s->next_seq++;
		sent++;
	}
	if (sent) {
		kick_tx(s);
		if (O.gap_us)
			usleep(O.gap_us);
	}
}

static void *umem_area(size_t bytes)
{
	void *a = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (a == MAP_FAILED)
		die("mmap the UMEM", errno);
	return a;
}

/* The UMEM(s): one for every socket (shared), or one each. */
static void make_umems(void)
{
	struct xsk_umem_config uc = { .fill_size = 2048, .comp_size = 2048, .frame_size = O.frame_size,
				      .frame_headroom = O.headroom };
	unsigned n = O.shared_umem ? 1 : O.nq;
	size_t per = (size_t)O.frames * O.frame_size * (O.shared_umem ? O.nq : 1);

	for (unsigned u = 0; u < n; u++) {
		umems[u].area = umem_area(per);
		int err = xsk_umem__create(&umems[u].umem, umems[u].area, per, &socks[u].fill,
					   &socks[u].comp, &uc);
		if (err)
			die("xsk_umem__create", err);
	}
}

/* Socket `i` on its queue: shares UMEM 0 with its own fill and completion rings, or has its own. */
static int make_socket(unsigned i, uint16_t bind_mode)
{
	struct sock *s = &socks[i];
	struct xsk_socket_config sc = { .rx_size = 2048, .tx_size = 2048,
					.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,
					.xdp_flags = XDP_FLAGS_DRV_MODE };
	struct xsk_umem *u = umems[O.shared_umem ? 0 : i].umem;

	sc.bind_flags = bind_mode | (O.need_wakeup ? XDP_USE_NEED_WAKEUP : 0);
	s->idx = i;
	s->queue = O.queues[i];
	s->nframes = O.frames;
	s->first = O.shared_umem ? (uint64_t)i * O.frames * O.frame_size : 0;
	s->free = calloc(O.frames, sizeof(*s->free));
	s->state = calloc(O.frames, 1);
	if (!s->free || !s->state)
		die("calloc", ENOMEM);
	s->nfree = 0;
	for (unsigned f = 0; f < O.frames; f++)
		s->free[s->nfree++] = s->first + (uint64_t)(O.frames - 1 - f) * O.frame_size;
	if (O.shared_umem && i > 0)
		return xsk_socket__create_shared(&s->xsk, O.ifname, s->queue, u, &s->rx, &s->tx,
						 &s->fill, &s->comp, &sc);
	return xsk_socket__create(&s->xsk, O.ifname, s->queue, u, &s->rx, &s->tx, &sc);
}

/* Whether socket `s` is bound in zero-copy mode (as the kernel reports it). */
static int is_zerocopy(const struct sock *s)
{
	struct xdp_options xo = { 0 };
	socklen_t l = sizeof(xo);

	if (getsockopt(xsk_socket__fd(s->xsk), SOL_XDP, XDP_OPTIONS, &xo, &l))
		return -1;
	return !!(xo.flags & XDP_OPTIONS_ZEROCOPY);
}

/* probe: 0 when a zero-copy bind works on the queue, 3 when it is refused but a copy bind works. */
static int probe(void)
{
	O.nq = 1;
	O.frames = 256;
	make_umems();
	int err = make_socket(0, XDP_ZEROCOPY);

	if (!err) {
		printf("zerocopy=offered queue=%u\n", O.queues[0]);
		return 0;
	}
	fprintf(stderr, "onic_xsk: zero-copy bind: %s\n", strerror(-err));
	err = make_socket(0, XDP_COPY);
	if (err)
		die("copy-mode bind after the refused zero-copy one", err);
	printf("zerocopy=refused queue=%u\n", O.queues[0]);
	return 3;
}

static int own_hwaddr(void)
{
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", O.ifname);
	if (fd < 0 || ioctl(fd, SIOCGIFHWADDR, &ifr))
		die(O.ifname, errno);
	memcpy(own_mac, ifr.ifr_hwaddr.sa_data, 6);
	close(fd);
	return (int)if_nametoindex(O.ifname);
}

static uint64_t total(size_t off)
{
	uint64_t t = 0;

	for (unsigned i = 0; i < O.nq; i++)
		t += *(uint64_t *)((char *)&socks[i] + off);
	return t;
}

#define TOTAL(field) total(offsetof(struct sock, field))

/* Whether the run has done what it was asked (frames received, or sent and completed). */
static int done(void)
{
	if (!O.count)
		return 0;
	if (strcmp(O.mode, "txonly") == 0)
		return TOTAL(comp_n) >= (uint64_t)O.count * O.nq;
	return TOTAL(rx_n) >= O.count;
}

/* Replaces the attached filter with a fresh copy of it through its link (BPF_F_REPLACE: only
 * if ours is still the one attached); returns the new one's fd. */
static int swap_filter(int link_fd, int map_fd, int old_fd)
{
	LIBBPF_OPTS(bpf_link_update_opts, uo, .old_prog_fd = old_fd, .flags = BPF_F_REPLACE);
	int fd = load_filter(map_fd);
	int err = bpf_link_update(link_fd, fd, &uo);

	if (err)
		die("swap the XDP filter", err);
	close(old_fd);
	return fd;
}

/* The sockets' work until done, the run time, the deadline, a signal or the device's end;
 * returns the exit code so far. */
static int run_loop(int link_fd, int map_fd, int *prog_fd, unsigned *swaps)
{
	double t0 = now(), next_swap = t0 + O.swap_ms / 1e3, next_check = t0;
	struct pollfd pfd[MAX_QUEUES];
	int tx = strcmp(O.mode, "txonly") == 0;

	for (unsigned i = 0; i < O.nq; i++)
		pfd[i] = (struct pollfd){ .fd = xsk_socket__fd(socks[i].xsk), .events = POLLIN };
	while (!stop_flag && !done()) {
		double t = now();

		if (O.run_s && t - t0 >= O.run_s)
			return 0;
		if (t - t0 >= O.deadline_s)
			return 2;
		if (dev_gone)
			return 4;
		if (t >= next_check) {
			/* an unbound socket (its device unregistered) refuses sendto: ENXIO */
			for (unsigned i = 0; i < O.nq; i++)
				if (sendto(xsk_socket__fd(socks[i].xsk), NULL, 0, MSG_DONTWAIT, NULL, 0) < 0 &&
				    errno == ENXIO)
					dev_gone = errno;
			next_check = t + 0.5;
		}
		if (O.swap_ms && t >= next_swap) {
			*prog_fd = swap_filter(link_fd, map_fd, *prog_fd);
			(*swaps)++;
			next_swap = t + O.swap_ms / 1e3;
		}
		for (unsigned i = 0; i < O.nq; i++) {
			struct sock *s = &socks[i];

			reap(s);
			refill(s);
			if (tx)
				tx_batch(s);
			else
				rx_batch(s);
			if (s->tx_n > s->comp_n)
				kick_tx(s);
		}
		if (poll(pfd, O.nq, tx ? 1 : 10) < 0 && errno != EINTR)
			return die("poll", errno);
		for (unsigned i = 0; i < O.nq; i++)
			if (pfd[i].revents & (POLLERR | POLLHUP | POLLNVAL))
				dev_gone = ENXIO;
	}
	return 0;
}

/* At the end: every frame sent is completed (within 5 s), the RX ring is emptied, and every
 * frame of every socket must be in the free list or in the fill ring; returns the frames that
 * are neither (the driver holds them in zero-copy mode) and prints the count. */
static int account(int zc)
{
	double t0 = now();
	unsigned held = 0, in_tx = 0, free_n = 0, fill_ring = 0, user = 0, errs = 0;

	for (unsigned i = 0; i < O.nq; i++) {
		struct sock *s = &socks[i];

		while (s->tx_n > s->comp_n && now() - t0 < 5 && !dev_gone) {
			kick_tx(s);
			reap(s);
			usleep(1000);
		}
		uint32_t idx, n = xsk_ring_cons__peek(&s->rx, 1u << 30, &idx);

		for (uint32_t k = 0; k < n; k++) {
			uint64_t a = xsk_ring_cons__rx_desc(&s->rx, idx + k)->addr;

			if (frame_move(s, a, ST_FILL, ST_FREE) == 0)
				s->free[s->nfree++] = xsk_umem__extract_addr(a);
		}
		xsk_ring_cons__release(&s->rx, n);
		unsigned st[4] = { 0 };

		for (unsigned f = 0; f < s->nframes; f++)
			st[s->state[f]]++;
		unsigned ring = *s->fill.producer - *s->fill.consumer;

		fill_ring += ring;
		held += st[ST_FILL] > ring ? st[ST_FILL] - ring : 0;
		errs += st[ST_FILL] < ring || st[ST_FREE] != s->nfree;
		in_tx += st[ST_TX];
		user += st[ST_USER];
		free_n += s->nfree;
	}
	printf("umem_frames=%u free=%u fill_ring=%u in_tx=%u user=%u kernel_held=%u",
	       O.frames * O.nq, free_n, fill_ring, in_tx, user, held);
	int ok = !errs && !in_tx && !user && (zc || !held) &&
		 free_n + fill_ring + held == O.frames * O.nq;
	printf(" accounted=%s", ok ? "yes" : "no");
	return ok;
}

static void print_xdp_stats(void)
{
	struct xdp_statistics sum = { 0 };

	for (unsigned i = 0; i < O.nq; i++) {
		struct xdp_statistics st = { 0 };
		socklen_t l = sizeof(st);

		if (getsockopt(xsk_socket__fd(socks[i].xsk), SOL_XDP, XDP_STATISTICS, &st, &l))
			continue;
		sum.rx_dropped += st.rx_dropped;
		sum.rx_invalid_descs += st.rx_invalid_descs;
		sum.tx_invalid_descs += st.tx_invalid_descs;
		sum.rx_ring_full += st.rx_ring_full;
		sum.rx_fill_ring_empty_descs += st.rx_fill_ring_empty_descs;
	}
	printf(" rx_dropped=%llu rx_invalid=%llu tx_invalid=%llu rx_ring_full=%llu fill_empty=%llu",
	       (unsigned long long)sum.rx_dropped, (unsigned long long)sum.rx_invalid_descs,
	       (unsigned long long)sum.tx_invalid_descs, (unsigned long long)sum.rx_ring_full,
	       (unsigned long long)sum.rx_fill_ring_empty_descs);
}

/* Sockets, the filter and its map; the loop; the counts. */
static int xsk_main(void)
{
	int ifindex = own_hwaddr(), zc = 0, err;
	unsigned swaps = 0;

	if (!ifindex)
		die(O.ifname, errno);
	if (strcmp(O.mode, "probe") == 0)
		return probe();
	int map_fd = bpf_map_create(BPF_MAP_TYPE_XSKMAP, "onic_xsks", 4, 4, MAX_QUEUES, NULL);

	if (map_fd < 0)
		die("create the XSK map", map_fd);
	make_umems();
	for (unsigned i = 0; i < O.nq; i++) {
		err = make_socket(i, O.bind_mode);
		if (err)
			die("bind the AF_XDP socket", err);
		err = xsk_socket__update_xskmap(socks[i].xsk, map_fd);
		if (err)
			die("put the socket into the XSK map", err);
		zc += is_zerocopy(&socks[i]) == 1;
		prime(&socks[i]);
	}
	int prog_fd = load_filter(map_fd);

	/* attached through a link: it goes when the process does, however it ends */
	LIBBPF_OPTS(bpf_link_create_opts, lo, .flags = XDP_FLAGS_DRV_MODE);
	int link_fd = bpf_link_create(prog_fd, ifindex, BPF_XDP, &lo);

	if (link_fd < 0)
		die("attach the XDP filter (native)", link_fd);
	printf("bound queues=%u zerocopy=%u\n", O.nq, zc);
	fflush(stdout);
	int code = run_loop(link_fd, map_fd, &prog_fd, &swaps);

	if (code == 0 && dev_gone)
		code = 4;
	/* the filter goes first: nothing more arrives while the sockets are counted */
	close(link_fd);
	printf("mode=%s queues=%u zerocopy=%u need_wakeup=%d rx=%llu tx=%llu fill=%llu comp=%llu "
	       "bad=%llu state_errors=%llu tx_full=%llu swaps=%u ",
	       O.mode, O.nq, zc, O.need_wakeup, (unsigned long long)TOTAL(rx_n),
	       (unsigned long long)TOTAL(tx_n), (unsigned long long)TOTAL(fill_n),
	       (unsigned long long)TOTAL(comp_n), (unsigned long long)TOTAL(bad),
	       (unsigned long long)TOTAL(state_err), (unsigned long long)TOTAL(tx_full), swaps);
	int ok = account(zc == O.nq);

	print_xdp_stats();
	for (unsigned i = 0; i < O.nq; i++)
		printf("%s%u:%llu/%llu", i ? "," : " per_queue=", socks[i].queue,
		       (unsigned long long)socks[i].rx_n, (unsigned long long)socks[i].tx_n);
	printf(" exit=%s\n", code == 2 ? "deadline" : code == 4 ? "device-gone" : "done");
	for (unsigned i = 0; i < O.nq; i++)
		xsk_socket__delete(socks[i].xsk);
	for (unsigned u = 0; u < (O.shared_umem ? 1 : O.nq); u++)
		xsk_umem__delete(umems[u].umem);
	if (code)
		return code;
	return ok && !TOTAL(bad) && !TOTAL(state_err) ? 0 : 5;
}

/* ---- the peer side: AF_PACKET on the other port */

static int peer_open(void)
{
	int ifindex = own_hwaddr(), fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL)), sz = 16 << 20;
	struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL),
				   .sll_ifindex = ifindex };

	if (fd < 0 || bind(fd, (struct sockaddr *)&sll, sizeof(sll)))
		die("AF_PACKET socket", errno);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz));
	setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz));
	return fd;
}

static void peer_send_one(int fd, uint32_t seq)
{
	static unsigned char f[MAX_LEN];
	unsigned len = frame_len(seq);

	make_frame(f, len, seq, (uint16_t)(seq % O.flows), O.peer_mac, own_mac);
	while (send(fd, f, len, 0) < 0)
		if (errno != ENOBUFS && errno != EAGAIN && errno != EINTR)
			die("send", errno);
		else
			usleep(100);
}

/* What the peer received of ours: counted in seen[] (a second copy is a duplicate). */
struct tally {
	unsigned char *seen;
	unsigned got, bad, dup, foreign;
};

/* Receives for up to `ms`; returns the frames of ours that arrived. */
static unsigned peer_recv(int fd, struct tally *t, int ms)
{
	static unsigned char f[2048];
	struct pollfd p = { .fd = fd, .events = POLLIN };
	unsigned n = 0;

	if (poll(&p, 1, ms) <= 0)
		return 0;
	for (;;) {
		struct sockaddr_ll from;
		socklen_t fl = sizeof(from);
		ssize_t len = recvfrom(fd, f, sizeof(f), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
		long seq;

		if (len < 0)
			return n;
		if (from.sll_pkttype == PACKET_OUTGOING)
			continue;
		if (!frame_ok(f, (unsigned)len, own_mac, O.peer_mac, &seq)) {
			if (seq >= 0)
				t->bad++;
			else
				t->foreign++;
			continue;
		}
		if ((unsigned long)seq >= O.count) {
			t->bad++;
		} else if (t->seen[seq]) {
			t->dup++;
		} else {
			t->seen[seq] = 1;
			t->got++;
			n++;
		}
	}
}

/* peer-send, peer-echo (window of O.window frames in flight), peer-recv. */
static int peer_main(void)
{
	int fd = peer_open();
	double t0 = now(), last = t0;
	struct tally t = { .seen = calloc(O.count + 1, 1) };
	unsigned sent = 0, stalls = 0, written_off = 0, late = 0;
	int echo = strcmp(O.mode, "peer-echo") == 0, send_only = strcmp(O.mode, "peer-send") == 0;

	if (!O.have_peer_mac || !t.seen)
		die("peer: -M MAC of the XSK port and -n COUNT are needed", EINVAL);
	if (send_only) {
		for (; sent < O.count; sent++) {
			peer_send_one(fd, sent);
			if (O.gap_us && sent % 16 == 15)
				usleep(O.gap_us);
		}
		printf("sent=%u\n", sent);
		return 0;
	}
	printf("ready\n");
	while (t.got < O.count && now() - t0 < O.deadline_s) {
		/* Frames written off that came back after all are no longer in flight (sent - got
		 * counts every frame not back yet, the written-off ones among them). */
		if (written_off > sent - t.got) {
			late += written_off - (sent - t.got);
			written_off = sent - t.got;
		}
		while (echo && sent < O.count && sent - t.got - written_off < (unsigned)O.window)
			peer_send_one(fd, sent++);
		if (peer_recv(fd, &t, 100)) {
			last = now();
		} else if (echo && now() - last > 1) {
			/* nothing for a second: the frames in flight are written off, the window
			 * opens again */
			written_off = sent - t.got;
			stalls++;
			last = now();
		}
	}
	peer_recv(fd, &t, 300); /* late duplicates */
	printf("sent=%u got=%u bad=%u dup=%u missing=%u foreign=%u stalls=%u late=%u\n", sent,
	       t.got, t.bad, t.dup, O.count - t.got, t.foreign, stalls, late);
	return t.got == O.count && !t.bad && !t.dup ? 0 : t.got < O.count ? 2 : 5;
}

/* ---- options */

static int parse_mac(const char *s, unsigned char *m)
{
	return sscanf(s, "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) == 6;
}

static void parse_queues(const char *s)
{
	char *end;

	O.nq = 0;
	do {
		unsigned long q = strtoul(s, &end, 10);

		if (end == s || q >= 64 || O.nq == MAX_QUEUES)
			die("-q: queue numbers, comma separated, at most 8", EINVAL);
		O.queues[O.nq++] = (unsigned)q;
		s = end + 1;
	} while (*end == ',');
	if (*end)
		die("-q: queue numbers, comma separated", EINVAL);
}

static void parse_opts(int argc, char **argv)
{
	int c;

	while ((c = getopt(argc, argv, "q:m:w:U:f:n:t:d:CS:l:F:g:W:M:H:Z:")) != -1) {
		switch (c) {
		case 'q': parse_queues(optarg); break;
		case 'm':
			if (strcmp(optarg, "copy") == 0)
				O.bind_mode = XDP_COPY;
			else if (strcmp(optarg, "zc") == 0)
				O.bind_mode = XDP_ZEROCOPY;
			else if (strcmp(optarg, "auto") == 0)
				O.bind_mode = 0;
			else
				die("-m: copy, zc or auto", EINVAL);
			break;
		case 'w': O.need_wakeup = atoi(optarg) != 0; break;
		case 'U': O.shared_umem = strcmp(optarg, "each") != 0; break;
		case 'f': O.frames = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'n': O.count = (unsigned)strtoul(optarg, NULL, 10); break;
		case 't': O.run_s = atof(optarg); break;
		case 'd': O.deadline_s = atof(optarg); break;
		case 'C': O.check = 1; break;
		case 'S': O.swap_ms = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'l': O.len = atoi(optarg); break;
		case 'F': O.flows = atoi(optarg); break;
		case 'g': O.gap_us = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'W': O.window = atoi(optarg); break;
		case 'M': O.have_peer_mac = parse_mac(optarg, O.peer_mac); break;
		case 'H': O.headroom = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'Z': O.frame_size = (unsigned)strtoul(optarg, NULL, 10); break;
		default: exit(1);
		}
	}
	if (O.frames < 2 * BATCH || O.frames > 65536 || (O.len && (O.len < MIN_LEN || O.len > MAX_LEN)) ||
	    O.flows < 1 || O.flows > 60000 || O.window < 1 || O.deadline_s <= 0 ||
	    (O.frame_size != 2048 && O.frame_size != 4096) || O.headroom >= O.frame_size)
		die("options out of range (-f 128..65536, -l 60..1514, -F 1..60000, -W >= 1, -d > 0, -Z 2048|4096, -H < -Z)",
		    EINVAL);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: onic_xsk rxdrop|txonly|l2fwd|probe|peer-send|peer-echo|peer-recv IF [options]\n");
		return 1;
	}
	O.mode = argv[1];
	O.ifname = argv[2];
	parse_opts(argc - 2, argv + 2);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (strncmp(O.mode, "peer-", 5) == 0)
		return peer_main();
	if (strcmp(O.mode, "rxdrop") && strcmp(O.mode, "txonly") && strcmp(O.mode, "l2fwd") &&
	    strcmp(O.mode, "probe"))
		die("mode: rxdrop, txonly, l2fwd, probe, peer-send, peer-echo or peer-recv", EINVAL);
	if ((O.check || strcmp(O.mode, "txonly") == 0) && !O.have_peer_mac)
		die("-C and txonly need -M MAC of the peer port", EINVAL);
	return xsk_main();
}
