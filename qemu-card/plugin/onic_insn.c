/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * onic_insn: a QEMU TCG plugin that counts the instructions a guest executes, per translation
 * block, between two marker instructions the guest runs (`vm-bench --profile`).
 *
 * Every translated block gets an inline counter of its executions (no callback on the hot
 * path). The guest marks a window with `onic_prof start` and `onic_prof stop`
 * (os-linux/vm/onic_prof.c), which execute a seven-byte NOP whose displacement spells "ONIS"
 * or "ONIE": nothing else emits those bytes. At a start marker the plugin takes every block's
 * count as its base; at a stop marker it writes `window-N` (N = 0, 1, ... in the order of the
 * stops) into the directory given as `out=DIR`, one line per block that ran in the window:
 *
 *     <start address, hex> <instructions in the block> <executions in the window>
 *
 * The same address can appear twice with different lengths (QEMU translates a block again,
 * shorter, when icount ends it early); every line counts. The xtask maps addresses to the
 * guest's symbols (its /proc/kallsyms, written by onic_prof dump) and sums per function.
 *
 * Exact for one vCPU (vm-bench --icount). With several vCPUs the counters are not atomic and
 * may lose a few increments where two vCPUs run the same block at once.
 */
#include <glib.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

struct block {
	uint64_t vaddr;
	uint64_t execs;
	uint64_t base;
	uint32_t insns;
	struct block *next_same_vaddr;
};

static GMutex lock;
/* vaddr -> first block at that address (a chain of blocks of different lengths). */
static GHashTable *by_vaddr;
/* Every block, for the snapshots. */
static GPtrArray *blocks;
static char *out_dir;
static unsigned windows;

#define MARK_START 'S'
#define MARK_STOP 'E'

static struct block *block_for(uint64_t vaddr, uint32_t insns)
{
	struct block *first, *b;

	g_mutex_lock(&lock);
	first = g_hash_table_lookup(by_vaddr, &vaddr);
	for (b = first; b; b = b->next_same_vaddr)
		if (b->insns == insns)
			break;
	if (!b) {
		b = g_new0(struct block, 1);
		b->vaddr = vaddr;
		b->insns = insns;
		b->next_same_vaddr = first;
		g_hash_table_insert(by_vaddr, &b->vaddr, b);
		g_ptr_array_add(blocks, b);
	}
	g_mutex_unlock(&lock);
	return b;
}

static void write_window(void)
{
	char *path = g_strdup_printf("%s/window-%u", out_dir, windows++);
	FILE *f = fopen(path, "w");
	guint i;

	if (!f) {
		char *msg = g_strdup_printf("onic_insn: cannot write %s\n", path);

		qemu_plugin_outs(msg);
		g_free(msg);
		g_free(path);
		return;
	}
	for (i = 0; i < blocks->len; i++) {
		struct block *b = g_ptr_array_index(blocks, i);
		uint64_t n = b->execs - b->base;

		if (n)
			fprintf(f, "%" PRIx64 " %u %" PRIu64 "\n", b->vaddr, b->insns, n);
	}
	fclose(f);
	g_free(path);
}

static void on_mark(unsigned int vcpu, void *udata)
{
	guint i;

	(void)vcpu;
	g_mutex_lock(&lock);
	if ((uintptr_t)udata == MARK_START) {
		for (i = 0; i < blocks->len; i++) {
			struct block *b = g_ptr_array_index(blocks, i);

			b->base = b->execs;
		}
	} else {
		write_window();
	}
	g_mutex_unlock(&lock);
}

/* `nopl 0xKK494e4f(%rax)`, KK the kind (S or E): bytes 0f 1f 80 4f 4e 49 KK, "ONI" + kind. */
static int mark_kind(struct qemu_plugin_insn *insn)
{
	const uint8_t *d;

	if (qemu_plugin_insn_size(insn) != 7)
		return 0;
	d = qemu_plugin_insn_data(insn);
	if (d[0] != 0x0f || d[1] != 0x1f || d[2] != 0x80 || memcmp(d + 3, "ONI", 3))
		return 0;
	return d[6] == MARK_START || d[6] == MARK_STOP ? d[6] : 0;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb);
	struct block *b = block_for(qemu_plugin_tb_vaddr(tb), (uint32_t)n);
	size_t i;

	(void)id;
	qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &b->execs, 1);
	for (i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		int kind = mark_kind(insn);

		if (kind)
			qemu_plugin_register_vcpu_insn_exec_cb(insn, on_mark, QEMU_PLUGIN_CB_NO_REGS,
							       (void *)(uintptr_t)kind);
	}
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
					   int argc, char **argv)
{
	int i;

	(void)info;
	for (i = 0; i < argc; i++)
		if (g_str_has_prefix(argv[i], "out="))
			out_dir = g_strdup(argv[i] + 4);
	if (!out_dir) {
		qemu_plugin_outs("onic_insn: needs out=DIR\n");
		return -1;
	}
	by_vaddr = g_hash_table_new(g_int64_hash, g_int64_equal);
	blocks = g_ptr_array_new();
	qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
	return 0;
}
