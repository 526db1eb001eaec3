// SPDX-License-Identifier: GPL-2.0
/*
 * onic: what context the Rust side runs in (whether it may sleep), for every file of the glue.
 */
#include <linux/hardirq.h>
#include <linux/irqflags.h>
#include <linux/percpu.h>
#include <linux/preempt.h>

#include "onic_compat.h"
#include "onic_glue.h"

/* The context the Rust side runs in is known, not guessed. Interrupt context, bottom halves off
 * and interrupts off show in the CPU's state whatever the kernel's configuration (the softirq
 * and hardirq counts of preempt_count are always kept, irqs_disabled() reads the flags): that
 * covers the NAPI poll (softirq, busy polling and threaded NAPI with bottom halves off, netpoll
 * with interrupts off) and transmit (bottom halves off, or netpoll). Every other entry from a
 * context that may not sleep (ndo_xdp_xmit, the TX watchdog, stats64, timers, the model's lock
 * held with interrupts off, anything under a spinlock) is bracketed by onic_atomic_enter/exit,
 * which count on this CPU (such a context cannot migrate): in_atomic() cannot tell, since
 * without CONFIG_PREEMPT_COUNT a spinlock leaves no trace in preempt_count. Allocations and
 * delays take GFP_ATOMIC and busy-waiting in such a context, GFP_KERNEL and sleeping outside;
 * might_sleep() there lets a debug kernel (DEBUG_ATOMIC_SLEEP) report an entry point that forgot
 * to say so. */
static DEFINE_PER_CPU(unsigned int, onic_atomic_depth);

/* Preemption stays off inside (a no-op cost where the caller is atomic already): a caller that is
 * preemptible (ndo_get_stats64 may be) cannot move to another CPU between enter and exit, which
 * would leave one CPU's count up and bring another's to 0 under a spinlock. */
void onic_atomic_enter(void)
{
	preempt_disable();
	this_cpu_inc(onic_atomic_depth);
}

void onic_atomic_exit(void)
{
	this_cpu_dec(onic_atomic_depth);
	preempt_enable();
}

bool onic_may_sleep(void)
{
	return !in_interrupt() && !irqs_disabled() && this_cpu_read(onic_atomic_depth) == 0;
}
