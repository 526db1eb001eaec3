// SPDX-License-Identifier: MIT
/*
 * onic_udp_sink: the receiving application of `vm-bench --sender card` (os-linux/vm/bench.sh).
 *
 *   onic_udp_sink PORT
 *
 * Binds a UDP socket to PORT on every address and reads each datagram into user space until
 * SIGINT or SIGTERM, then prints how many it read. The card's traffic generator sends raw
 * datagrams that no iperf3 server would accept; the receive path must still end as an
 * application's would: the datagram copied out and its skb freed (where the RX memory model
 * gets its pages back).
 */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

int main(int argc, char **argv)
{
	static unsigned char buf[65536];
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY) };
	struct sigaction sa = { .sa_handler = on_signal };
	unsigned long long datagrams = 0, bytes = 0;
	int rcvbuf = 16 << 20;
	char *end;
	long port;
	int fd;

	port = argc == 2 ? strtol(argv[1], &end, 10) : 0;
	if (argc != 2 || *end || port < 1 || port > 65535) {
		fprintf(stderr, "usage: onic_udp_sink PORT (1..65535)\n");
		return 2;
	}
	addr.sin_port = htons((unsigned short)port);
	/* No SA_RESTART: the signal ends the blocked recv with EINTR. */
	if (sigaction(SIGINT, &sa, NULL) || sigaction(SIGTERM, &sa, NULL)) {
		perror("onic_udp_sink: sigaction");
		return 1;
	}
	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof(addr))) {
		perror("onic_udp_sink: socket/bind");
		return 1;
	}
	/* A receive buffer past net.core.rmem_max (the guest runs it as root): a burst of
	 * datagrams that arrives while this process waits for the CPU is queued, not dropped. */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)))
		perror("onic_udp_sink: SO_RCVBUFFORCE (the default buffer stays)");
	while (!stop) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);

		if (n >= 0) {
			datagrams++;
			bytes += (unsigned long long)n;
		} else if (errno != EINTR) {
			perror("onic_udp_sink: recv");
			return 1;
		}
	}
	printf("onic_udp_sink: %llu datagrams, %llu bytes\n", datagrams, bytes);
	return 0;
}
