/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * onic-card: an AMD OpenNIC card (open-nic-shell + QDMA) as PCI functions of QEMU, for testing
 * drivers without an FPGA. The card itself is the onic-rs behavioral model (onic-sim), linked
 * in as libonic_qemu_card.a; this file only adapts it to QEMU:
 *
 *   BAR read/write          -> onic_model_bar_read/_write (then the model runs)
 *   the model's DMA         -> pci_dma_read/pci_dma_write of the queue's function, so a vIOMMU
 *                              translates (and faults) every access
 *   the model's interrupts  -> msix_notify
 *   its completion timers   -> a QEMU_CLOCK_VIRTUAL timer (which also wakes the control
 *                              window's traffic generator for its next frame)
 *   its ports (optional)    -> a NIC backend per function (netdev=), else cabled to each other
 *
 * Devices (all functions of one card share one model, named by the "card" property):
 *
 *   -device onic-card,card=c0,addr=N.0,multifunction=on[,netdev=...]   PF0 (0x10ee:0x903f)
 *   -device onic-card,card=c0,addr=N.1[,netdev=...]                    PF1 (0x10ee:0x913f)
 *   -device onic-card-ctl,card=c0,addr=N.2                             test-control window
 *
 * Each PF has BAR0 (QDMA), BAR2 (shell, 4 MiB) and an MSI-X table in BAR4 with the stock
 * shell's vector count (10 on PF0, 9 on PF1). The control function has one BAR with the
 * model's fault knobs and counters (qemu-card/src/ctl.rs); no real card has it.
 */

#include "qemu/osdep.h"
#include "qemu/module.h"
#include "qemu/queue.h"
#include "qemu/timer.h"
#include "qemu/error-report.h"
#include "qapi/error.h"
#include "hw/pci/pci.h"
#include "hw/pci/pcie.h"
#include "hw/pci/msix.h"
#include "hw/qdev-properties.h"
#include "migration/vmstate.h"
#include "net/net.h"
#include "onic/onic_model.h"
#include "onic/onic_model_ids.h"

#define TYPE_ONIC_CARD "onic-card"
#define TYPE_ONIC_CARD_CTL "onic-card-ctl"
#define ONIC_FUNCS 2
#define ONIC_MSIX_BAR 4
#define ONIC_PCIE_CAP 0xa0

typedef struct OnicFunc OnicFunc;

/* One card: the model and the functions that reach it. */
typedef struct OnicCard {
    char *name;
    unsigned users;
    OnicModel *model;
    OnicFunc *pf[ONIC_FUNCS];
    QEMUTimer *timer;
    QLIST_ENTRY(OnicCard) next;
} OnicCard;

struct OnicFunc {
    PCIDevice parent_obj;
    char *card_name;
    OnicCard *card;
    uint8_t func;
    bool ctl;
    MemoryRegion bar0, bar2;
    NICConf conf;
    NICState *nic;
};

/* Both device types' instances are an OnicFunc. */
#define ONIC_FUNC(obj) ((OnicFunc *)(obj))

static QLIST_HEAD(, OnicCard) onic_cards = QLIST_HEAD_INITIALIZER(onic_cards);

/* ------------------------------------------------------------------ the model's host */

static PCIDevice *onic_pf_dev(OnicCard *c, uint8_t func)
{
    return func < ONIC_FUNCS && c->pf[func] ? PCI_DEVICE(c->pf[func]) : NULL;
}

/* A function whose bus mastering its driver switched off reaches no memory: the model counts
 * such an access apart from those the bus refuses (qemu-card/src/ffi.rs). */
static bool onic_master_on(PCIDevice *d)
{
    return pci_get_word(d->config + PCI_COMMAND) & PCI_COMMAND_MASTER;
}

static uint32_t onic_dma_read(void *opaque, uint8_t func, uint64_t addr, uint8_t *buf, size_t len)
{
    PCIDevice *d = onic_pf_dev(opaque, func);

    if (!d) {
        return ONIC_DMA_REFUSED;
    }
    if (!onic_master_on(d)) {
        return ONIC_DMA_MASTER_OFF;
    }
    return pci_dma_read(d, addr, buf, len) == MEMTX_OK ? ONIC_DMA_OK : ONIC_DMA_REFUSED;
}

static uint32_t onic_dma_write(void *opaque, uint8_t func, uint64_t addr, const uint8_t *buf, size_t len)
{
    PCIDevice *d = onic_pf_dev(opaque, func);

    if (!d) {
        return ONIC_DMA_REFUSED;
    }
    if (!onic_master_on(d)) {
        return ONIC_DMA_MASTER_OFF;
    }
    return pci_dma_write(d, addr, buf, len) == MEMTX_OK ? ONIC_DMA_OK : ONIC_DMA_REFUSED;
}

static void onic_irq(void *opaque, uint8_t func, uint16_t vector)
{
    PCIDevice *d = onic_pf_dev(opaque, func);

    if (d && vector < d->msix_entries_nr) {
        msix_notify(d, vector);
    } else {
        warn_report("onic-card: interrupt for function %u vector %u, which has none", func, vector);
    }
}

static void onic_egress(void *opaque, uint8_t port, const uint8_t *buf, size_t len)
{
    OnicCard *c = opaque;

    if (port < ONIC_FUNCS && c->pf[port] && c->pf[port]->nic) {
        qemu_send_packet(qemu_get_queue(c->pf[port]->nic), buf, len);
    }
}

static void onic_log(void *opaque, const char *line)
{
    error_report("%s", line);
}

/* The model, created on first use: by then every function of the card is realized, so whether
 * the ports go to NIC backends (any PF has a netdev) or to each other is known. */
static OnicModel *onic_model(OnicCard *c)
{
    if (!c->model) {
        OnicModelHost host = {
            .opaque = c,
            .dma_read = onic_dma_read,
            .dma_write = onic_dma_write,
            .irq = onic_irq,
            .egress = onic_egress,
            .log = onic_log,
        };
        OnicModelConfig cfg = {
            .functions = ONIC_FUNCS,
            .ports = ONIC_FUNCS,
            .total_queues = ONIC_TOTAL_QUEUES,
            .open_ports = (c->pf[0] && c->pf[0]->nic) || (c->pf[1] && c->pf[1]->nic),
        };
        c->model = onic_model_new(&cfg, &host);
    }
    return c->model;
}

/* Lets the card do the work that is due and wakes it again for its next completion timer. */
static void onic_kick(OnicCard *c)
{
    uint64_t next = onic_model_run(onic_model(c), qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL));

    if (next == ONIC_MODEL_NO_DEADLINE) {
        timer_del(c->timer);
    } else {
        timer_mod(c->timer, next);
    }
}

static void onic_timer(void *opaque)
{
    onic_kick(opaque);
}

static OnicCard *onic_card_get(const char *name)
{
    OnicCard *c;

    QLIST_FOREACH(c, &onic_cards, next) {
        if (!strcmp(c->name, name)) {
            c->users++;
            return c;
        }
    }
    c = g_new0(OnicCard, 1);
    c->name = g_strdup(name);
    c->users = 1;
    c->timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, onic_timer, c);
    QLIST_INSERT_HEAD(&onic_cards, c, next);
    return c;
}

static void onic_card_put(OnicCard *c)
{
    if (--c->users) {
        return;
    }
    QLIST_REMOVE(c, next);
    timer_free(c->timer);
    onic_model_free(c->model);
    g_free(c->name);
    g_free(c);
}

/* ------------------------------------------------------------------ BARs */

static uint64_t onic_bar_read(OnicFunc *f, uint8_t bar, hwaddr addr, unsigned size)
{
    return onic_model_bar_read(onic_model(f->card), f->func, bar, addr, size);
}

static void onic_bar_write(OnicFunc *f, uint8_t bar, hwaddr addr, uint64_t val, unsigned size)
{
    onic_model_bar_write(onic_model(f->card), f->func, bar, addr, size, (uint32_t)val);
    onic_kick(f->card);
}

static uint64_t onic_bar0_read(void *opaque, hwaddr addr, unsigned size)
{
    return onic_bar_read(opaque, ONIC_QDMA_BAR, addr, size);
}

static void onic_bar0_write(void *opaque, hwaddr addr, uint64_t val, unsigned size)
{
    onic_bar_write(opaque, ONIC_QDMA_BAR, addr, val, size);
}

static uint64_t onic_bar2_read(void *opaque, hwaddr addr, unsigned size)
{
    return onic_bar_read(opaque, ONIC_SHELL_BAR, addr, size);
}

static void onic_bar2_write(void *opaque, hwaddr addr, uint64_t val, unsigned size)
{
    onic_bar_write(opaque, ONIC_SHELL_BAR, addr, val, size);
}

static uint64_t onic_ctl_read(void *opaque, hwaddr addr, unsigned size)
{
    OnicFunc *f = opaque;

    return onic_model_ctl_read(onic_model(f->card), addr);
}

static void onic_ctl_write(void *opaque, hwaddr addr, uint64_t val, unsigned size)
{
    OnicFunc *f = opaque;

    onic_model_ctl_write(onic_model(f->card), addr, (uint32_t)val);
    onic_kick(f->card);
}

/* Every size reaches the model, which takes aligned 32-bit accesses only and counts the rest
 * (the shell's AXI-Lite registers). */
#define ONIC_MMIO_OPS(r, w)                                                     \
    {                                                                           \
        .read = (r), .write = (w), .endianness = DEVICE_LITTLE_ENDIAN,          \
        .valid = { .min_access_size = 1, .max_access_size = 8 },                \
        .impl = { .min_access_size = 1, .max_access_size = 8 },                 \
    }

static const MemoryRegionOps onic_bar0_ops = ONIC_MMIO_OPS(onic_bar0_read, onic_bar0_write);
static const MemoryRegionOps onic_bar2_ops = ONIC_MMIO_OPS(onic_bar2_read, onic_bar2_write);
static const MemoryRegionOps onic_ctl_ops = ONIC_MMIO_OPS(onic_ctl_read, onic_ctl_write);

/* A card that left the bus (the control window's GONE) answers no configuration read either:
 * all ones, as the root complex completes a read nobody claimed, so the OS can tell it is gone
 * (pci_device_is_present). Its configuration writes go nowhere. */
static bool onic_gone(OnicFunc *f)
{
    return f->card && f->card->model && onic_model_ctl_read(f->card->model, ONIC_CTL_GONE);
}

static uint32_t onic_config_read(PCIDevice *pdev, uint32_t addr, int len)
{
    if (onic_gone(ONIC_FUNC(pdev))) {
        return len >= 4 ? UINT32_MAX : (1u << (8 * len)) - 1;
    }
    return pci_default_read_config(pdev, addr, len);
}

static void onic_config_write(PCIDevice *pdev, uint32_t addr, uint32_t val, int len)
{
    if (!onic_gone(ONIC_FUNC(pdev))) {
        pci_default_write_config(pdev, addr, val, len);
    }
}

/* ------------------------------------------------------------------ network backend */

static ssize_t onic_receive(NetClientState *nc, const uint8_t *buf, size_t size)
{
    OnicFunc *f = qemu_get_nic_opaque(nc);

    onic_model_inject(onic_model(f->card), f->func, buf, size);
    onic_kick(f->card);
    return size;
}

static NetClientInfo onic_net_info = {
    .type = NET_CLIENT_DRIVER_NIC,
    .size = sizeof(NICState),
    .receive = onic_receive,
};

/* ------------------------------------------------------------------ realize / unrealize */

/* The PCIe capability of a QDMA function: the driver turns on relaxed ordering and extended
 * tags and sets the read request size to 512 (hardware.md §1.4), so the card offers extended
 * tags and lets those Device Control fields be written (QEMU's generic endpoint offers neither).
 */
static void onic_pcie_cap(PCIDevice *pdev)
{
    uint16_t devctl = PCI_EXP_DEVCTL_RELAX_EN | PCI_EXP_DEVCTL_EXT_TAG | PCI_EXP_DEVCTL_READRQ;

    pcie_endpoint_cap_init(pdev, ONIC_PCIE_CAP);
    pci_long_test_and_set_mask(pdev->config + pdev->exp.exp_cap + PCI_EXP_DEVCAP, PCI_EXP_DEVCAP_EXT_TAG);
    pci_word_test_and_set_mask(pdev->wmask + pdev->exp.exp_cap + PCI_EXP_DEVCTL, devctl);
}

static void onic_join(OnicFunc *f, Error **errp)
{
    PCIDevice *pdev = PCI_DEVICE(f);

    f->func = PCI_FUNC(pdev->devfn);
    f->card = onic_card_get(f->card_name ? f->card_name : "card0");
    if (f->ctl) {
        return;
    }
    if (f->func >= ONIC_FUNCS || f->card->pf[f->func]) {
        error_setg(errp, "onic-card: card %s has no free PF at function %u", f->card->name, f->func);
        onic_card_put(f->card);
        f->card = NULL;
        return;
    }
    f->card->pf[f->func] = f;
}

static void onic_pf_realize(PCIDevice *pdev, Error **errp)
{
    OnicFunc *f = ONIC_FUNC(pdev);
    unsigned vectors, v;

    onic_join(f, errp);
    if (!f->card) {
        return;
    }
    vectors = f->func == 0 ? ONIC_PF0_VECTORS : ONIC_PF1_VECTORS;
    pci_config_set_device_id(pdev->config, f->func == 0 ? ONIC_PCI_PF0_DEVICE : ONIC_PCI_PF1_DEVICE);
    memory_region_init_io(&f->bar0, OBJECT(f), &onic_bar0_ops, f, "onic-qdma", ONIC_QDMA_BAR_LEN);
    memory_region_init_io(&f->bar2, OBJECT(f), &onic_bar2_ops, f, "onic-shell", ONIC_SHELL_BAR_LEN);
    pci_register_bar(pdev, ONIC_QDMA_BAR, PCI_BASE_ADDRESS_SPACE_MEMORY | PCI_BASE_ADDRESS_MEM_TYPE_64,
                     &f->bar0);
    pci_register_bar(pdev, ONIC_SHELL_BAR, PCI_BASE_ADDRESS_SPACE_MEMORY | PCI_BASE_ADDRESS_MEM_TYPE_64,
                     &f->bar2);
    if (msix_init_exclusive_bar(pdev, vectors, ONIC_MSIX_BAR, errp)) {
        f->card->pf[f->func] = NULL;
        onic_card_put(f->card);
        f->card = NULL;
        return;
    }
    for (v = 0; v < vectors; v++) {
        msix_vector_use(pdev, v);
    }
    if (pci_is_express(pdev)) {
        onic_pcie_cap(pdev);
    }
    if (f->conf.peers.ncs[0]) {
        f->nic = qemu_new_nic(&onic_net_info, &f->conf, object_get_typename(OBJECT(f)),
                              DEVICE(f)->id, &DEVICE(f)->mem_reentrancy_guard, f);
        qemu_format_nic_info_str(qemu_get_queue(f->nic), f->conf.macaddr.a);
    }
}

static void onic_pf_exit(PCIDevice *pdev)
{
    OnicFunc *f = ONIC_FUNC(pdev);

    if (!f->card) {
        return;
    }
    if (f->nic) {
        qemu_del_nic(f->nic);
        f->nic = NULL;
    }
    msix_unuse_all_vectors(pdev);
    msix_uninit_exclusive_bar(pdev);
    f->card->pf[f->func] = NULL;
    onic_card_put(f->card);
    f->card = NULL;
}

/* A reset of PF0 (the master function) resets the card. */
static void onic_pf_reset(DeviceState *dev)
{
    OnicFunc *f = ONIC_FUNC(dev);

    if (f->card && f->func == 0 && f->card->model) {
        onic_model_reset(f->card->model);
        timer_del(f->card->timer);
    }
}

static void onic_ctl_realize(PCIDevice *pdev, Error **errp)
{
    OnicFunc *f = ONIC_FUNC(pdev);

    f->ctl = true;
    onic_join(f, errp);
    memory_region_init_io(&f->bar0, OBJECT(f), &onic_ctl_ops, f, "onic-ctl", ONIC_CTL_BAR_LEN);
    pci_register_bar(pdev, 0, PCI_BASE_ADDRESS_SPACE_MEMORY, &f->bar0);
}

static void onic_ctl_exit(PCIDevice *pdev)
{
    OnicFunc *f = ONIC_FUNC(pdev);

    if (f->card) {
        onic_card_put(f->card);
        f->card = NULL;
    }
}

static const VMStateDescription onic_vmstate = {
    .name = "onic-card",
    .unmigratable = 1,
};

static Property onic_pf_props[] = {
    DEFINE_PROP_STRING("card", OnicFunc, card_name),
    DEFINE_NIC_PROPERTIES(OnicFunc, conf),
    DEFINE_PROP_END_OF_LIST(),
};

static Property onic_ctl_props[] = {
    DEFINE_PROP_STRING("card", OnicFunc, card_name),
    DEFINE_PROP_END_OF_LIST(),
};

static void onic_pf_class_init(ObjectClass *klass, void *data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);
    PCIDeviceClass *k = PCI_DEVICE_CLASS(klass);

    k->realize = onic_pf_realize;
    k->exit = onic_pf_exit;
    k->config_read = onic_config_read;
    k->config_write = onic_config_write;
    k->vendor_id = ONIC_PCI_VENDOR;
    k->device_id = ONIC_PCI_PF0_DEVICE;
    k->class_id = ONIC_PCI_CLASS;
    dc->desc = "AMD OpenNIC shell + QDMA physical function (onic-rs card model)";
    dc->reset = onic_pf_reset;
    dc->vmsd = &onic_vmstate;
    device_class_set_props(dc, onic_pf_props);
    set_bit(DEVICE_CATEGORY_NETWORK, dc->categories);
}

static void onic_ctl_class_init(ObjectClass *klass, void *data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);
    PCIDeviceClass *k = PCI_DEVICE_CLASS(klass);

    k->realize = onic_ctl_realize;
    k->exit = onic_ctl_exit;
    k->vendor_id = ONIC_PCI_VENDOR;
    k->device_id = ONIC_PCI_CTL_DEVICE;
    k->class_id = PCI_CLASS_OTHERS;
    dc->desc = "test-control window of an onic-card (fault knobs; no real card has it)";
    dc->vmsd = &onic_vmstate;
    device_class_set_props(dc, onic_ctl_props);
    set_bit(DEVICE_CATEGORY_MISC, dc->categories);
}

static const TypeInfo onic_types[] = {
    {
        .name = TYPE_ONIC_CARD,
        .parent = TYPE_PCI_DEVICE,
        .instance_size = sizeof(OnicFunc),
        .class_init = onic_pf_class_init,
        .interfaces = (InterfaceInfo[]) { { INTERFACE_PCIE_DEVICE }, { } },
    },
    {
        .name = TYPE_ONIC_CARD_CTL,
        .parent = TYPE_PCI_DEVICE,
        .instance_size = sizeof(OnicFunc),
        .class_init = onic_ctl_class_init,
        .interfaces = (InterfaceInfo[]) { { INTERFACE_PCIE_DEVICE }, { } },
    },
};

DEFINE_TYPES(onic_types)
