// SPDX-License-Identifier: MIT
/*
 * onic_prof: the guest's side of `vm-bench --profile` (QEMU plugin qemu-card/plugin/onic_insn.c).
 *
 *   onic_prof start   executes the start marker: the plugin takes its counts as the base
 *   onic_prof stop    executes the stop marker: the plugin writes the window's counts
 *   onic_prof dump    copies standard input to QEMU's debug console (I/O port 0xe9), which
 *                     vm-bench writes to a file: the symbols and window labels the host needs
 *
 * The markers are seven-byte NOPs (`nopl disp32(%rax)`) whose displacement spells "ONIS" or
 * "ONIE"; on a QEMU without the plugin they do nothing. The process's own start-up and exit run
 * outside and inside the window respectively: some ten thousand instructions against windows of
 * billions.
 */
#include <stdio.h>
#include <string.h>
#include <sys/io.h>
#include <unistd.h>

#define DEBUGCON_PORT 0xe9

static int dump(void)
{
	unsigned char buf[65536];
	ssize_t n;

	if (ioperm(DEBUGCON_PORT, 1, 1)) {
		perror("onic_prof: ioperm");
		return 1;
	}
	while ((n = read(0, buf, sizeof(buf))) > 0)
		outsb(DEBUGCON_PORT, buf, (unsigned long)n);
	return n < 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "start")) {
		__asm__ volatile(".byte 0x0f, 0x1f, 0x80, 'O', 'N', 'I', 'S'");
		return 0;
	}
	if (argc == 2 && !strcmp(argv[1], "stop")) {
		__asm__ volatile(".byte 0x0f, 0x1f, 0x80, 'O', 'N', 'I', 'E'");
		return 0;
	}
	if (argc == 2 && !strcmp(argv[1], "dump"))
		return dump();
	fprintf(stderr, "usage: onic_prof start|stop|dump\n");
	return 2;
}
