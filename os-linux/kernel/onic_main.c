// SPDX-License-Identifier: GPL-2.0
/*
 * onic: module init/exit, parameters, the PCI driver, simulation mode, and the small helpers the
 * Rust side calls for what only C can reach (kmalloc flags, spinlocks, the DMA API, printk).
 *
 * The driver's logic is Rust (os-linux/src, linked in as onic_rust.o); this file only creates
 * and destroys kernel objects and forwards to it.
 */
#include <linux/delay.h>
#include <linux/dma-direct.h>
#include <linux/dma-map-ops.h>
#include <linux/dma-mapping.h>
#include <linux/gfp.h>
#include <linux/hrtimer.h>
#include <linux/interrupt.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/platform_device.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/swiotlb.h>

#include "onic_compat.h"
#include "onic_glue.h"

static bool sim;
module_param(sim, bool, 0444);
MODULE_PARM_DESC(sim, "Simulation mode: create two ports on a software model of the card (no FPGA needed)");

static uint sim_queues = 2;
module_param(sim_queues, uint, 0444);
MODULE_PARM_DESC(sim_queues, "Simulation mode: queue pairs per port at load (1-8, default 2)");

static bool debug;
module_param(debug, bool, 0444);
MODULE_PARM_DESC(debug, "Log the driver core's debug messages");

static bool rs_fec = true;
module_param(rs_fec, bool, 0444);
MODULE_PARM_DESC(rs_fec, "Enable RS-FEC on the CMACs (the reference driver's RS_FEC_ENABLED, default on)");

bool onic_rx_page_pool = true;
module_param_named(rx_page_pool, onic_rx_page_pool, bool, 0444);
MODULE_PARM_DESC(rx_page_pool,
		 "RX buffers from a page_pool per queue (default); 0: the reference driver's old model, a page allocated and mapped per packet");

static bool sim_dma_api;
module_param(sim_dma_api, bool, 0444);
MODULE_PARM_DESC(sim_dma_api,
		 "Simulation mode: allocate, map and sync through the kernel DMA API of a platform device per port; the model reaches memory only through the DMA addresses it returned");

/* ---------------------------------------------------------------- helpers for the Rust side */

/* The Rust heap and the model allocate from NAPI, transmit and the engine timer too. */
static gfp_t onic_gfp(void)
{
	if (!onic_may_sleep())
		return GFP_ATOMIC;
	might_sleep();
	return GFP_KERNEL;
}

void *onic_kmalloc(size_t size)
{
	return kmalloc(size, onic_gfp());
}

void onic_kfree(void *p)
{
	kfree(p);
}

void *onic_alloc_pages_exact(size_t size)
{
	return alloc_pages_exact(size, onic_gfp());
}

void onic_free_pages_exact(void *p, size_t size)
{
	free_pages_exact(p, size);
}

void onic_printk(int level, const u8 *msg, size_t len)
{
	int n = (int)min_t(size_t, len, 1024);

	switch (level) {
	case 0 ... 3:
		pr_err("%.*s\n", n, msg);
		break;
	case 4:
		pr_warn("%.*s\n", n, msg);
		break;
	case 5:
		pr_notice("%.*s\n", n, msg);
		break;
	case 6:
		pr_info("%.*s\n", n, msg);
		break;
	default:
		printk(KERN_DEBUG "%.*s\n", n, msg);
		break;
	}
}

void onic_rust_panic(const u8 *msg, size_t len)
{
	panic("onic: Rust panic: %.*s\n", (int)min_t(size_t, len, 512), msg);
}

/* The model card's lock, taken with interrupts off: the card is reached from process context,
 * softirq context and netpoll (interrupts off). The flags live with the lock; only the holder
 * touches them. */
struct onic_irqlock {
	spinlock_t lock;
	unsigned long flags;
};

void *onic_lock_new(void)
{
	struct onic_irqlock *l = kzalloc(sizeof(*l), onic_gfp());

	if (l)
		spin_lock_init(&l->lock);
	return l;
}

void onic_lock_free(void *lock)
{
	kfree(lock);
}

void onic_lock(void *p)
{
	struct onic_irqlock *l = p;
	unsigned long flags;

	spin_lock_irqsave(&l->lock, flags);
	l->flags = flags;
	onic_atomic_enter();
}

void onic_unlock(void *p)
{
	struct onic_irqlock *l = p;

	onic_atomic_exit();
	spin_unlock_irqrestore(&l->lock, l->flags);
}

void onic_ctx_lock(struct mutex *lock)
{
	mutex_lock(lock);
}

void onic_ctx_unlock(struct mutex *lock)
{
	mutex_unlock(lock);
}

void onic_udelay(u32 us)
{
	if (!onic_may_sleep()) {
		udelay(us);
	} else {
		might_sleep();
		fsleep(us);
	}
}

void onic_ndelay(u32 ns)
{
	ndelay(ns);
}

void *onic_dma_alloc_coherent(void *dev, size_t len, u64 *dma)
{
	dma_addr_t a;
	void *cpu = dma_alloc_coherent(dev, len, &a, onic_gfp());

	*dma = a;
	return cpu;
}

void onic_dma_free_coherent(void *dev, size_t len, void *cpu, u64 dma)
{
	dma_free_coherent(dev, len, cpu, dma);
}

void *onic_page_alloc(void)
{
	struct page *p = alloc_page(onic_gfp() | __GFP_ZERO);

	return p ? page_address(p) : NULL;
}

void onic_page_free(void *cpu)
{
	free_page((unsigned long)cpu);
}

int onic_dma_map_page(void *dev, void *cpu, int dir, u64 *dma)
{
	dma_addr_t a = dma_map_page(dev, virt_to_page(cpu), 0, PAGE_SIZE, dir);

	if (dma_mapping_error(dev, a))
		return -ENOMEM;
	*dma = a;
	return 0;
}

void onic_dma_unmap_page(void *dev, u64 dma, int dir)
{
	dma_unmap_page(dev, dma, PAGE_SIZE, dir);
}

int onic_dma_map_single(void *dev, u8 *cpu, size_t len, int dir, u64 *dma)
{
	dma_addr_t a = dma_map_single(dev, cpu, len, dir);

	if (dma_mapping_error(dev, a))
		return -ENOMEM;
	*dma = a;
	return 0;
}

void onic_dma_unmap_single(void *dev, u64 dma, size_t len, int dir)
{
	dma_unmap_single(dev, dma, len, dir);
}

/* The one sync entry point: len bytes from off into the streaming mapping at dma (a page or a
 * single mapping, dma its start), for the CPU or for the device. */
void onic_dma_sync(void *dev, u64 dma, size_t off, size_t len, int dir, bool for_cpu)
{
	if (for_cpu)
		dma_sync_single_range_for_cpu(dev, dma, off, len, dir);
	else
		dma_sync_single_range_for_device(dev, dma, off, len, dir);
}

/* What device address dma of dev reaches under the direct mapping: the page, or the swiotlb
 * bounce slot when the kernel bounces. Only memory the kernel maps is answered. */
void *onic_dma_to_virt(struct device *dev, u64 dma)
{
	phys_addr_t phys = dma_to_phys(dev, dma);

	if (!pfn_valid(PHYS_PFN(phys)))
		return NULL;
	return phys_to_virt(phys);
}

/* Whether every sync of dev's streaming mappings is known to do nothing, so that the driver may
 * leave them out (before 6.11; see below). A sync does work only when the device is not cache
 * coherent, when a mapping went through an IOMMU's ops (which may bounce or flush), or when the
 * direct mapping bounced a buffer through swiotlb: always under a forced bounce (memory
 * encryption, swiotlb=force), otherwise only for a buffer beyond the device's DMA mask or its
 * bus's limit, which a device with a 64-bit mask and no bus limit never has. Those are fixed
 * once the masks are set at probe, so the answer holds for every mapping of the device.
 * From 6.11 the DMA API asks the same question itself, inline, before any sync call
 * (dma_dev_need_sync), and may change its answer at run time (a first bounce): there the
 * driver keeps calling and this says false. */
bool onic_dma_sync_is_noop(void *dev)
{
#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 11, 0)
	struct device *d = dev;

	return !get_dma_ops(d) && dev_is_dma_coherent(d) && !is_swiotlb_force_bounce(d) &&
	       d->dma_mask && *d->dma_mask == DMA_BIT_MASK(64) &&
	       (!d->bus_dma_limit || d->bus_dma_limit == DMA_BIT_MASK(64));
#else
	return false;
#endif
}

/* Rust asks this when a queue's invalidation did not complete, before it gives the queue's
 * memory up (hal RegisterWindow::cut_off): true when the function reaches no memory any more,
 * because it has left the bus (its configuration space no longer answers) or because its bus
 * mastering is now off. The configuration read after the write flushes: its completion cannot
 * pass the memory writes the function issued before (PCIe ordering). ndo_open sets bus
 * mastering again. Process context (the context-command paths sleep). */
bool onic_dma_cut_off(void *dev)
{
	struct device *d = dev;
	struct pci_dev *pdev;
	u16 cmd;

	if (!dev_is_pci(d))
		return false;
	pdev = to_pci_dev(d);
	if (!pci_device_is_present(pdev)) {
		dev_warn_ratelimited(d, "the card has left the bus: its queues' memory goes back without their invalidation\n");
		return true;
	}
	if (pdev->is_busmaster) {
		pci_clear_master(pdev);
		dev_err(d, "context commands do not complete: bus mastering is off until the interface is opened again\n");
	}
	return !pci_read_config_word(pdev, PCI_COMMAND, &cmd) && !(cmd & PCI_COMMAND_MASTER);
}

/* ---------------------------------------------------------------- PCI */

/* hardware.md §1.1: device ID 0x9<PF><gen><lanes>, Gen3 x1/x2/x4/x8/x16 and Gen4 x1/x2/x4/x8,
 * PF0-PF3, plus 0x6AA0. */
#define ONIC_ID(id) { PCI_DEVICE(PCI_VENDOR_ID_XILINX, (id)) }
#define ONIC_PF_IDS(pf)                                                               \
	ONIC_ID(0x9031 + (pf) * 0x100), ONIC_ID(0x9032 + (pf) * 0x100),                   \
	ONIC_ID(0x9034 + (pf) * 0x100), ONIC_ID(0x9038 + (pf) * 0x100),                   \
	ONIC_ID(0x903F + (pf) * 0x100), ONIC_ID(0x9041 + (pf) * 0x100),                   \
	ONIC_ID(0x9042 + (pf) * 0x100), ONIC_ID(0x9044 + (pf) * 0x100),                   \
	ONIC_ID(0x9048 + (pf) * 0x100)

static const struct pci_device_id onic_pci_ids[] = {
	ONIC_PF_IDS(0), ONIC_PF_IDS(1), ONIC_PF_IDS(2), ONIC_PF_IDS(3),
	ONIC_ID(0x6AA0),
	{ 0 }
};
MODULE_DEVICE_TABLE(pci, onic_pci_ids);

/* BAR2 window the driver maps (hardware.md §1.2: SHELL_START 0, SHELL_MAXLEN 4 MiB). */
#define ONIC_SHELL_LEN 0x400000

/* One card: the PCI functions of one slot share the QDMA's indirect context registers
 * (hardware.md §5.1), so they share one context-command lock. Cards are found by domain, bus and
 * slot. */
struct onic_card {
	struct list_head node;
	int domain;
	unsigned int bus, slot;
	unsigned int users;
	struct mutex ctx_lock;
};

static LIST_HEAD(onic_cards);
static DEFINE_MUTEX(onic_cards_lock);

static struct onic_card *onic_card_get(struct pci_dev *pdev)
{
	int domain = pci_domain_nr(pdev->bus);
	unsigned int bus = pdev->bus->number, slot = PCI_SLOT(pdev->devfn);
	struct onic_card *c;

	mutex_lock(&onic_cards_lock);
	list_for_each_entry(c, &onic_cards, node)
		if (c->domain == domain && c->bus == bus && c->slot == slot)
			goto found;
	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		goto out;
	c->domain = domain;
	c->bus = bus;
	c->slot = slot;
	mutex_init(&c->ctx_lock);
	list_add(&c->node, &onic_cards);
found:
	c->users++;
out:
	mutex_unlock(&onic_cards_lock);
	return c;
}

static void onic_card_put(struct onic_card *c)
{
	mutex_lock(&onic_cards_lock);
	if (!--c->users) {
		list_del(&c->node);
		mutex_destroy(&c->ctx_lock);
		kfree(c);
	}
	mutex_unlock(&onic_cards_lock);
}

struct onic_pci {
	struct pci_dev *pdev;
	int user_irq;	/* the user vector's IRQ (pci_irq_vector takes a mutex: not in the handler) */
	struct onic_ndev *nd;
	struct onic_card *card;
	void __iomem *bar0, *bar2;
	size_t bar0_len;
	u16 queues;
	int nvec;
	bool registered;
	char misc_name[2][IFNAMSIZ + 8];
};

static irqreturn_t onic_queue_irq(int irq, void *data)
{
	struct onic_qv *qv = data;

	/* hardware.md §11.2: the handler touches no register, it schedules the queue's NAPI. */
	napi_schedule_irqoff(&qv->napi);
	return IRQ_HANDLED;
}

/* The user vector (the shell raises none the driver uses) and, on the master PF, the QDMA's
 * error vector: its registers are read and decoded (onic_rs_error_report: each error register
 * whose group is set, each bit set in it with its name and meaning) and reported at most a few
 * times in a burst (ratelimited), from hard-IRQ context (MMIO reads only; the error
 * interrupt is not re-armed, as in the reference driver, so an error that stays asserted cannot
 * become a storm). */
static irqreturn_t onic_misc_irq(int irq, void *data)
{
	struct onic_pci *op = data;
	char report[512];
	bool any = false;

	if (irq == op->user_irq) {
		dev_warn_ratelimited(&op->pdev->dev, "user interrupt on IRQ %d (not used by the shell)\n", irq);
		return IRQ_HANDLED;
	}
	if (op->nd && op->nd->port) {
		onic_atomic_enter();
		any = onic_rs_error_report(op->nd->port, report, sizeof(report));
		onic_atomic_exit();
	}
	if (any)
		dev_err_ratelimited(&op->pdev->dev, "QDMA error interrupt: %s\n", report);
	else
		dev_warn_ratelimited(&op->pdev->dev, "QDMA error interrupt with no error reported\n");
	return IRQ_HANDLED;
}

static void onic_pci_free_irqs(struct pci_dev *pdev, struct onic_pci *op)
{
	int v;

	for (v = 0; v < op->queues; v++)
		if (op->nd && op->nd->qv[v].irq >= 0) {
			irq_update_affinity_hint(op->nd->qv[v].irq, NULL);
			free_irq(op->nd->qv[v].irq, &op->nd->qv[v]);
			op->nd->qv[v].irq = -1;
		}
	for (v = op->queues; v < op->nvec; v++)
		free_irq(pci_irq_vector(pdev, v), op);
	op->nvec = op->queues;
}

static void onic_pci_teardown(struct pci_dev *pdev, struct onic_pci *op)
{
	if (op->nd) {
		onic_ndev_unregister(op->nd, op->registered);
		onic_devlink_unregister(op->nd);
		onic_pci_free_irqs(pdev, op);
		onic_ndev_free(op->nd); /* the function's register teardown (hardware.md §13.5) */
	}
	if (op->bar2)
		pci_iounmap(pdev, op->bar2);
	if (op->bar0)
		pci_iounmap(pdev, op->bar0);
	pci_free_irq_vectors(pdev);
	pci_release_mem_regions(pdev);
	pci_disable_device(pdev);
	if (op->card)
		onic_card_put(op->card);
	kfree(op);
}

/* Queue vector v: "<netdev name>-q<v>", affine to a CPU near the card (spread like the stack's
 * own queue mapping); the misc vectors "<name>-user" and "<name>-err". */
static int onic_pci_request_irqs(struct pci_dev *pdev, struct onic_pci *op, const char *name, int total)
{
	int node = dev_to_node(&pdev->dev);
	int v, err;

	for (v = 0; v < op->queues; v++) {
		struct onic_qv *qv = &op->nd->qv[v];
		int irq = pci_irq_vector(pdev, v);

		snprintf(qv->irq_name, sizeof(qv->irq_name), "%s-q%d", name, v);
		err = request_irq(irq, onic_queue_irq, 0, qv->irq_name, qv);
		if (err)
			return err;
		qv->irq = irq;
		irq_update_affinity_hint(irq, cpumask_of(cpumask_local_spread(v, node)));
	}
	for (v = op->queues; v < total; v++) {
		char *n = op->misc_name[v - op->queues];

		snprintf(n, sizeof(op->misc_name[0]), "%s-%s", name, v == op->queues ? "user" : "err");
		if (v == op->queues)
			op->user_irq = pci_irq_vector(pdev, v);
		err = request_irq(pci_irq_vector(pdev, v), onic_misc_irq, 0, n, op);
		if (err)
			return err;
		op->nvec = v + 1;
	}
	return 0;
}

static int onic_pci_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	u8 func = PCI_FUNC(pdev->devfn);
	/* User vector, plus the error vector on the master PF (hardware.md §11.1). */
	int misc = func == 0 ? 2 : 1;
	struct onic_port_params params;
	char name[IFNAMSIZ];
	struct onic_pci *op;
	int err, total;

	op = kzalloc(sizeof(*op), GFP_KERNEL);
	if (!op)
		return -ENOMEM;
	op->pdev = pdev;
	op->card = onic_card_get(pdev);
	if (!op->card) {
		kfree(op);
		return -ENOMEM;
	}
	/* hardware.md §1.4 */
	err = pci_enable_device_mem(pdev);
	if (err)
		goto free_op;
	err = dma_set_mask(&pdev->dev, DMA_BIT_MASK(64));
	if (!err)
		err = dma_set_coherent_mask(&pdev->dev, DMA_BIT_MASK(32));
	if (err)
		goto disable;
	err = pci_request_mem_regions(pdev, ONIC_DRV_NAME);
	if (err)
		goto disable;
	pcie_capability_set_word(pdev, PCI_EXP_DEVCTL, PCI_EXP_DEVCTL_RELAX_EN | PCI_EXP_DEVCTL_EXT_TAG);
	pci_set_master(pdev);
	pcie_set_readrq(pdev, 512);

	total = pci_msix_vec_count(pdev);
	if (total <= misc) {
		err = total < 0 ? total : -ENODEV;
		goto release;
	}
	op->queues = min_t(int, total - misc, ONIC_MAX_QUEUES);
	total = op->queues + misc;
	err = pci_alloc_irq_vectors(pdev, total, total, PCI_IRQ_MSIX);
	if (err < 0)
		goto release;
	op->nvec = op->queues;

	op->bar0_len = pci_resource_len(pdev, 0);
	op->bar0 = pci_iomap(pdev, 0, 0);
	op->bar2 = pci_iomap(pdev, 2, ONIC_SHELL_LEN);
	if (!op->bar0 || !op->bar2 || pci_resource_len(pdev, 2) < ONIC_SHELL_LEN) {
		err = -ENOMEM;
		goto teardown;
	}

	snprintf(name, sizeof(name), "onic%ds%df%d", pdev->bus->number, PCI_SLOT(pdev->devfn), func);
	op->nd = onic_ndev_alloc(&pdev->dev, name, op->queues, op->queues);
	if (!op->nd) {
		err = -ENOMEM;
		goto teardown;
	}
	params = (struct onic_port_params){
		.card_lock = &op->card->ctx_lock,
		.max_queues = op->queues,
		.queues = op->queues,
		.func = func,
		.rs_fec = rs_fec,
	};
	op->nd->port = onic_rs_port_new_pci(&pdev->dev, op->nd, op->bar0, op->bar0_len, op->bar2,
					    ONIC_SHELL_LEN, &params, &err);
	if (!op->nd->port)
		goto teardown;
	err = onic_pci_request_irqs(pdev, op, name, total);
	if (err)
		goto teardown;

	err = onic_ndev_register(op->nd);
	if (err)
		goto teardown;
	op->registered = true;
	op->nd->board_vendor = pdev->vendor;
	op->nd->board_device = pdev->device;
	onic_devlink_register(op->nd, &pdev->dev);
	pci_set_drvdata(pdev, op);
	return 0;

teardown:
	onic_pci_teardown(pdev, op);
	return err;
release:
	pci_release_mem_regions(pdev);
disable:
	pci_disable_device(pdev);
free_op:
	onic_card_put(op->card);
	kfree(op);
	return err;
}

static void onic_pci_remove(struct pci_dev *pdev)
{
	struct onic_pci *op = pci_get_drvdata(pdev);

	if (op)
		onic_pci_teardown(pdev, op);
	pci_set_drvdata(pdev, NULL);
}

/* Reboot or kexec: the card must stop all DMA before the memory it points at is reused. The same
 * path as remove: interface closed (queues invalidated), function released, bus mastering off. */
static void onic_pci_shutdown(struct pci_dev *pdev)
{
	onic_pci_remove(pdev);
}

static struct pci_driver onic_pci_driver = {
	.name = ONIC_DRV_NAME,
	.id_table = onic_pci_ids,
	.probe = onic_pci_probe,
	.remove = onic_pci_remove,
	.shutdown = onic_pci_shutdown,
};

/* ---------------------------------------------------------------- simulation mode */

#define ONIC_SIM_FUNCS 2
/* The engine's period: the model card works, its clock advances by the real time that passed,
 * and its interrupts schedule NAPI. */
#define ONIC_SIM_PERIOD_NS (500 * NSEC_PER_USEC)

struct onic_sim {
	const void *card;		/* Rust: Arc<SimCard> */
	struct onic_ndev *nd[ONIC_SIM_FUNCS];
	bool registered[ONIC_SIM_FUNCS];
	/* One platform device per function: devlink's device, and with sim_dma_api the device
	 * whose DMA API the ports use. */
	struct platform_device *pdev[ONIC_SIM_FUNCS];
	bool pdrv;	/* onic_sim_pdrv registered */
	struct mutex ctx_lock;		/* the card's context-command lock */
	struct hrtimer engine;
	u64 last_ns;
};

static struct onic_sim *onic_sim;
/* Serializes the sim_link / sim_tx_stall setters with the card's creation and destruction. */
static DEFINE_MUTEX(onic_sim_knobs);

/* The time the model's engine has run, in ns since load: under QEMU's -icount shift=0 one ns is
 * one guest instruction, so `cargo xtask vm-bench` reads the model's share of the guest's
 * instructions here (the register accesses, one call each into the model, stay the driver's).
 * Written by the engine only (one hrtimer), read through sysfs. */
static unsigned long long sim_model_ns;
module_param(sim_model_ns, ullong, 0444);
MODULE_PARM_DESC(sim_model_ns,
		 "Simulation mode: nanoseconds the card model's engine has run since load (under QEMU's -icount shift=0, its instructions); read-only");

static uint sim_link = (1 << ONIC_SIM_FUNCS) - 1;
static bool sim_tx_stall;
static bool sim_cmpt_freeze;

/* Applies the knobs to the model (onic_sim_knobs held). */
static void onic_sim_apply_knobs(struct onic_sim *s)
{
	int f;

	for (f = 0; f < ONIC_SIM_FUNCS; f++)
		onic_rs_sim_set_link(s->card, f, sim_link & (1u << f));
	onic_rs_sim_stall_tx(s->card, sim_tx_stall);
	onic_rs_sim_freeze_cmpt(s->card, sim_cmpt_freeze);
}

static int onic_sim_knob_set(const char *val, const struct kernel_param *kp)
{
	int err;

	mutex_lock(&onic_sim_knobs);
	err = kp->arg == &sim_link ? param_set_uint(val, kp) : param_set_bool(val, kp);
	if (!err && onic_sim)
		onic_sim_apply_knobs(onic_sim);
	mutex_unlock(&onic_sim_knobs);
	return err;
}

static const struct kernel_param_ops onic_sim_link_ops = {
	.set = onic_sim_knob_set,
	.get = param_get_uint,
};

static const struct kernel_param_ops onic_sim_bool_ops = {
	.set = onic_sim_knob_set,
	.get = param_get_bool,
};

module_param_cb(sim_link, &onic_sim_link_ops, &sim_link, 0644);
MODULE_PARM_DESC(sim_link, "Simulation mode: bit f set = the link of port f is up (default 3); writable at run time");
module_param_cb(sim_tx_stall, &onic_sim_bool_ops, &sim_tx_stall, 0644);
MODULE_PARM_DESC(sim_tx_stall,
		 "Simulation mode: the model stops writing TX status back (a hung H2C engine), for TX timeout tests; writable at run time");
module_param_cb(sim_cmpt_freeze, &onic_sim_bool_ops, &sim_cmpt_freeze, 0644);
MODULE_PARM_DESC(sim_cmpt_freeze,
		 "Simulation mode: completion rings keep their color across a wrap (a broken device), for RX recovery tests; writable at run time");

/* A one-shot fault, not a state: writing N makes the next N frames that arrive at either port of
 * the model carry a bad FCS (the CMAC counts and drops them); reading gives the last N written. */
static uint sim_bad_fcs;

static int onic_sim_bad_fcs_set(const char *val, const struct kernel_param *kp)
{
	int err;

	mutex_lock(&onic_sim_knobs);
	err = param_set_uint(val, kp);
	if (!err && onic_sim)
		onic_rs_sim_bad_fcs(onic_sim->card, sim_bad_fcs);
	mutex_unlock(&onic_sim_knobs);
	return err;
}

static const struct kernel_param_ops onic_sim_bad_fcs_ops = {
	.set = onic_sim_bad_fcs_set,
	.get = param_get_uint,
};

module_param_cb(sim_bad_fcs, &onic_sim_bad_fcs_ops, &sim_bad_fcs, 0644);
MODULE_PARM_DESC(sim_bad_fcs,
		 "Simulation mode: writing N gives the next N frames arriving at the model's ports a bad FCS, for the MAC's error counters; writable at run time");

/* Also one-shot: writing (U << 16 | C) makes the next C frames arriving at the model's ports carry
 * RS-FEC codeword errors the decoder corrects, the U frames after them errors it cannot (the
 * same word as the QEMU card's FEC_ERRORS control register). */
static uint sim_fec_errors;

static int onic_sim_fec_errors_set(const char *val, const struct kernel_param *kp)
{
	int err;

	mutex_lock(&onic_sim_knobs);
	err = param_set_uint(val, kp);
	if (!err && onic_sim)
		onic_rs_sim_fec_errors(onic_sim->card, sim_fec_errors & 0xffff, sim_fec_errors >> 16);
	mutex_unlock(&onic_sim_knobs);
	return err;
}

static const struct kernel_param_ops onic_sim_fec_errors_ops = {
	.set = onic_sim_fec_errors_set,
	.get = param_get_uint,
};

module_param_cb(sim_fec_errors, &onic_sim_fec_errors_ops, &sim_fec_errors, 0644);
MODULE_PARM_DESC(sim_fec_errors,
		 "Simulation mode: writing U << 16 | C gives the next C frames arriving at the model's ports correctable RS-FEC codeword errors, the U after them uncorrectable ones; writable at run time");

void onic_sim_irq(void *cookie, u8 func, u16 vector)
{
	struct onic_sim *s = cookie;
	struct onic_ndev *nd = func < ONIC_SIM_FUNCS ? s->nd[func] : NULL;

	if (nd && vector < nd->max_queues)
		napi_schedule(&nd->qv[vector].napi);
}

static enum hrtimer_restart onic_sim_engine(struct hrtimer *t)
{
	struct onic_sim *s = container_of(t, struct onic_sim, engine);
	u64 now = ktime_get_ns();

	onic_atomic_enter();
	onic_rs_sim_tick(s->card, now - s->last_ns, s);
	onic_atomic_exit();
	WRITE_ONCE(sim_model_ns, sim_model_ns + (ktime_get_ns() - now));
	s->last_ns = now;
	hrtimer_forward_now(t, ns_to_ktime(ONIC_SIM_PERIOD_NS));
	return HRTIMER_RESTART;
}

/* A driver named after the module bound to the simulation's platform devices: it does nothing,
 * but a device with a driver is what devlink (6.2+) names the driver after in dev info. */
static int onic_sim_pdrv_probe(struct platform_device *pdev)
{
	return 0;
}

static const struct platform_device_id onic_sim_pdev_ids[] = {
	{ .name = "onic-sim" },
	{ }
};

static struct platform_driver onic_sim_pdrv = {
	.driver = { .name = ONIC_DRV_NAME },
	.probe = onic_sim_pdrv_probe,
	.id_table = onic_sim_pdev_ids,
};

static void onic_sim_destroy(struct onic_sim *s)
{
	int f;

	hrtimer_cancel(&s->engine);
	for (f = 0; f < ONIC_SIM_FUNCS; f++)
		if (s->nd[f]) {
			onic_ndev_unregister(s->nd[f], s->registered[f]);
			onic_devlink_unregister(s->nd[f]);
		}
	for (f = 0; f < ONIC_SIM_FUNCS; f++)
		if (s->nd[f])
			onic_ndev_free(s->nd[f]);
	if (s->card)
		onic_rs_sim_free(s->card);
	for (f = 0; f < ONIC_SIM_FUNCS; f++)
		if (s->pdev[f])
			platform_device_unregister(s->pdev[f]);
	if (s->pdrv)
		platform_driver_unregister(&onic_sim_pdrv);
	mutex_destroy(&s->ctx_lock);
	kfree(s);
}

/* sim_dma_api: a platform device with the card's DMA masks (hardware.md §1.4: 64-bit streaming,
 * 32-bit coherent), reached through dma-direct (and swiotlb when the kernel bounces). */
static struct platform_device *onic_sim_dma_device(int f)
{
	struct platform_device_info info = {
		.name = "onic-sim",
		.id = f,
		.dma_mask = DMA_BIT_MASK(64),
	};
	struct platform_device *pdev = platform_device_register_full(&info);

	if (IS_ERR(pdev))
		return pdev;
	if (dma_set_coherent_mask(&pdev->dev, DMA_BIT_MASK(32))) {
		platform_device_unregister(pdev);
		return ERR_PTR(-EIO);
	}
	return pdev;
}

/* One function of the model card: its netdev and port. */
static int onic_sim_add_port(struct onic_sim *s, int f, u16 q)
{
	struct onic_port_params params = {
		.card_lock = &s->ctx_lock,
		.max_queues = ONIC_SIM_MAX_QUEUES,
		.queues = q,
		.func = f,
		.rs_fec = rs_fec,
	};
	struct device *dma_dev = NULL;
	char name[IFNAMSIZ];
	int err = -ENOMEM;

	/* The platform device is the function's device for devlink in any case, and its DMA API
	 * device with sim_dma_api. */
	s->pdev[f] = onic_sim_dma_device(f);
	if (IS_ERR(s->pdev[f])) {
		err = PTR_ERR(s->pdev[f]);
		s->pdev[f] = NULL;
		return err;
	}
	if (sim_dma_api)
		dma_dev = &s->pdev[f]->dev;
	snprintf(name, sizeof(name), "onicsim%d", f);
	s->nd[f] = onic_ndev_alloc(dma_dev, name, ONIC_SIM_MAX_QUEUES, q);
	if (!s->nd[f])
		return -ENOMEM;
	params.dma_dev = dma_dev;
	s->nd[f]->port = onic_rs_port_new_sim(s->card, s->nd[f], &params, &err);
	if (!s->nd[f]->port)
		return err;
	err = onic_ndev_register(s->nd[f]);
	if (err)
		return err;
	s->registered[f] = true;
	/* The stock shell's PCI IDs of PF0 and PF1 (hardware.md §1.1), which the model stands for. */
	s->nd[f]->board_vendor = 0x10ee;
	s->nd[f]->board_device = f ? 0x913f : 0x903f;
	onic_devlink_register(s->nd[f], &s->pdev[f]->dev);
	return 0;
}

/* The same path as a PCI probe, with the model as the HAL backend: one netdev per function. */
static int onic_sim_create(void)
{
	struct onic_sim *s;
	int f, err = -ENOMEM;
	u16 q = clamp_t(uint, sim_queues, 1, ONIC_SIM_MAX_QUEUES);

	s = kzalloc(sizeof(*s), GFP_KERNEL);
	if (!s)
		return -ENOMEM;
	mutex_init(&s->ctx_lock);
	onic_hrtimer_setup(&s->engine, onic_sim_engine, CLOCK_MONOTONIC, HRTIMER_MODE_REL_SOFT);
	s->card = onic_rs_sim_new();
	if (!s->card)
		goto fail;
	err = platform_driver_register(&onic_sim_pdrv);
	if (err)
		goto fail;
	s->pdrv = true;
	for (f = 0; f < ONIC_SIM_FUNCS; f++) {
		err = onic_sim_add_port(s, f, q);
		if (err)
			goto fail;
	}
	mutex_lock(&onic_sim_knobs);
	onic_sim_apply_knobs(s);
	onic_sim = s;
	mutex_unlock(&onic_sim_knobs);
	s->last_ns = ktime_get_ns();
	hrtimer_start(&s->engine, ns_to_ktime(ONIC_SIM_PERIOD_NS), HRTIMER_MODE_REL_SOFT);
	pr_info("onic: simulation mode: %s and %s on a model card, cable between them%s\n",
		s->nd[0]->netdev->name, s->nd[1]->netdev->name,
		sim_dma_api ? ", memory through the kernel DMA API" : "");
	return 0;
fail:
	onic_sim_destroy(s);
	return err;
}

/* ---------------------------------------------------------------- module */

static int __init onic_init(void)
{
	int err;

	onic_rs_init(debug);
	if (sim) {
		err = onic_sim_create();
		if (err)
			return err;
	}
	err = pci_register_driver(&onic_pci_driver);
	if (err && onic_sim) {
		struct onic_sim *s = onic_sim;

		mutex_lock(&onic_sim_knobs);
		onic_sim = NULL;
		mutex_unlock(&onic_sim_knobs);
		onic_sim_destroy(s);
	}
	return err;
}

static void __exit onic_exit(void)
{
	struct onic_sim *s;

	pci_unregister_driver(&onic_pci_driver);
	mutex_lock(&onic_sim_knobs);
	s = onic_sim;
	onic_sim = NULL;
	mutex_unlock(&onic_sim_knobs);
	if (s)
		onic_sim_destroy(s);
}

module_init(onic_init);
module_exit(onic_exit);

MODULE_DESCRIPTION("AMD OpenNIC (open-nic-shell + QDMA) network driver, Rust core");
/* GPL: the driver uses GPL-only exports (DMA API, NAPI/XDP helpers, page_pool). */
MODULE_LICENSE("GPL");
