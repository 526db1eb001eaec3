#!/bin/busybox sh
# /init of the VM test's initramfs (cargo xtask vm-test): loads onic.ko in simulation mode and
# checks it like a user would, then reports pass/fail to the host through QEMU's exit status
# (isa-debug-exit: 0x10 -> status 33 = pass, 0x11 -> 35 = fail).
/bin/busybox --install -s /bin
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
# Debian's static busybox runs its own applets before anything on PATH: name iproute2's ip and
# iputils' ping by their paths (ethtool and iperf3 have no applet).
IP=/usr/sbin/ip
PING=/usr/bin/ping
LSPCI=/usr/bin/lspci
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /run /var /tmp
ln -s /run /var/run
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
# libxdp (xdp-loader, xdp-filter) keeps its dispatcher state in bpffs. `ip netns exec` mounts a
# fresh sysfs over /sys, which hides this mount: the xdp-tools run under nsenter instead.
mount -t bpf bpf /sys/fs/bpf
# Every page pool's release is traced (tracepoint page_pool:page_pool_release: the pages still out
# when the pool is destroyed, then once a second until the last one came back); finish checks
# that every pool got all its pages back (pools_out).
mount -t tracefs tracefs /sys/kernel/tracing
echo 4096 >/sys/kernel/tracing/buffer_size_kb
echo 1 >/sys/kernel/tracing/events/page_pool/page_pool_release/enable

KO=/lib/modules/onic.ko
FAILS=0
PASSES=0
# Which card: the model inside the kernel (`sim=1`; behind the kernel DMA API with every buffer
# bounced when the command line says onic_sim_dma_api: the xtask boots one kernel so, with
# swiotlb=force), or the model as a PCI device of QEMU (`onic_card=pci`: qemu-card/, the module
# binds it like a real card, through BARs, MSI-X and DMA behind the vIOMMU or swiotlb).
# SLOW: the factor the waits for the kernel's own work are stretched by (onic_vm_slow=N: the
# debug kernel, whose checkers make everything several times slower). Deadlines of the driver's
# own promises (carrier within 0.5 s, rmmod within 60 s) are not stretched.
SLOW=$(sed -n 's/.*onic_vm_slow=\([0-9][0-9]*\).*/\1/p' /proc/cmdline)
SLOW=${SLOW:-1}
if grep -qw onic_card=pci /proc/cmdline; then
	MODE=pci
	SIMARGS=""
elif grep -qw onic_sim_dma_api /proc/cmdline; then
	MODE=sim-dma
	SIMARGS="sim=1 sim_dma_api=1"
else
	MODE=sim
	SIMARGS="sim=1"
fi
# The receive path tests a static key (netstamp_needed_key) that every ping process flips on
# and off (SO_TIMESTAMP). Under QEMU's multi-threaded TCG (the default; the VM test runs one TCG
# thread, VM_TEST_ACCEL in xtask/src/vm.rs, but other boots of this image may not), a vCPU can go
# on running a translated block of the old code after another vCPU patched it, and hit the
# patching's int3 after it is gone: an Oops
# in __netif_receive_skb_core or a CPU spinning in netif_receive_skb_list_internal at the
# patched jump, whatever the driver does. One timestamping socket open for the whole run keeps
# the key on, so the test's pings never patch kernel text.
/usr/sbin/ip link set lo up
# (in a subshell: not a job of this shell, which `wait`s for its own jobs)
(/usr/bin/ping -q -i 3600 127.0.0.1 >/dev/null 2>&1 &)
# A task blocked this long is a hang: the kernel panics (hung_task_panic=1 on the command line)
# and the run fails.
echo 30 >/proc/sys/kernel/hung_task_timeout_secs

pass() { echo "PASS: $*"; PASSES=$((PASSES + 1)); }
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
show() { sed 's/^/    | /' /tmp/out; }
# check DESC CMD...: CMD must succeed.
check() {
	desc=$1
	shift
	if "$@" >/tmp/out 2>&1; then pass "$desc"; else fail "$desc"; show; fi
}
# refuse DESC CMD...: CMD must fail.
refuse() {
	desc=$1
	shift
	if "$@" >/tmp/out 2>&1; then fail "$desc (was accepted)"; show; else pass "$desc"; fi
}
same() { # same DESC FILE1 FILE2 (the first differences, as cmp lists them, on a failure)
	if cmp -s "$2" "$3"; then pass "$1"; else fail "$1"; cmp -l "$2" "$3" 2>&1 | head -5 | sed 's/^/    | /'; fi
}
# listening NETNS-PREFIX PORT: waits, up to 40 s times the slow factor, until a socket in that
# end_jobs PID...: ends background jobs within a deadline: SIGTERM, up to 10 s (times SLOW) for
# them to exit, then SIGKILL. A process killed while its interface goes away (iperf3 after
# rmmod) can block in its exit path until TCP gives up, minutes later; an unbounded `wait` for
# it once stalled a whole run.
end_jobs() {
	kill "$@" 2>/dev/null
	n=0
	while [ $n -lt $((100 * SLOW)) ]; do
		alive=0
		for p in "$@"; do kill -0 "$p" 2>/dev/null && alive=1; done
		[ $alive = 0 ] && break
		sleep 0.1
		n=$((n + 1))
	done
	kill -9 "$@" 2>/dev/null
	wait "$@" 2>/dev/null
}
# namespace listens on TCP PORT (a server started in the background may take seconds to get
# there on a debug kernel); then returns, whether or not it did.
listening() {
	hex=$(printf '%04X' $2)
	n=0
	while [ $n -lt $((160 * SLOW)) ]; do
		$1 cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
			awk -v p=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }' && return 0
		sleep 0.25
		n=$((n + 1))
	done
}

# ---- the card: its netdevs and its fault knobs, in either mode
# pci_dev VENDOR:DEVICE: the sysfs directory of the first PCI function with that ID.
pci_dev() {
	for d in /sys/bus/pci/devices/*; do
		if [ "$(cat $d/vendor):$(cat $d/device)" = "$1" ]; then
			echo $d
			return
		fi
	done
}
PF0ID=0x10ee:0x903f
PF1ID=0x10ee:0x913f
# card_netdevs: IF0 and IF1, the netdevs of function 0 and 1 (PCI: named after the bus, slot
# and function, e.g. onic1s0f0; simulation: onicsim0 and onicsim1).
card_netdevs() {
	if [ $MODE = pci ]; then
		IF0=$(ls "$(pci_dev $PF0ID)/net" 2>/dev/null)
		IF1=$(ls "$(pci_dev $PF1ID)/net" 2>/dev/null)
	else
		IF0=onicsim0
		IF1=onicsim1
	fi
}
IF0=onicsim0
IF1=onicsim1
# The test-control window of the QEMU card (qemu-card/src/ctl.rs), reached with devmem through
# the BAR of its own PCI function, which no driver binds: ctl_rd OFFSET, ctl_wr OFFSET VALUE, the
# offsets as CTL_<register> (ctl.sh, written by cargo xtask from ctl.rs).
. /etc/onic/ctl.sh
[ $MODE = pci ] && ctl_open
# The faults both cards offer: link state (bit p = port p up), a hung H2C engine, a completion
# ring whose color never flips.
set_link() {
	if [ $MODE = pci ]; then ctl_wr $CTL_LINK "$1"; else echo "$1" >/sys/module/onic/parameters/sim_link; fi
}
set_tx_stall() {
	if [ $MODE = pci ]; then ctl_wr $CTL_TX_STALL "$1"; else echo "$1" >/sys/module/onic/parameters/sim_tx_stall; fi
}
set_cmpt_freeze() {
	if [ $MODE = pci ]; then ctl_wr $CTL_CMPT_FREEZE "$1"; else echo "$1" >/sys/module/onic/parameters/sim_cmpt_freeze; fi
}
# flood_frozen: a fault window begins, completion rings keep their color across a wrap, and a
# ping flood from a runs in the background (FL: its pid) until the ring error shows.
flood_frozen() {
	echo "onic-vm: fault window begins" >/dev/kmsg
	set_cmpt_freeze 1
	# Every caller stops it once the error was seen; the deadline only bounds a run where it
	# never is. 1000 stalled polls take a ping flood several seconds on an idle host, and over
	# 30 s on a loaded one (a flood sends 100 requests a second of the guest's time at most).
	timeout $((90 * SLOW)) $A $PING -f -w $((75 * SLOW)) -s 100 192.0.2.2 >/dev/null 2>&1 &
	FL=$!
}
# irqs NAME-PREFIX: interrupts counted on the vectors whose name starts with it, all CPUs.
irqs() {
	awk -v p="$1" '$NF ~ "^" p { for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/) s += $i; else break } END { print s + 0 }' /proc/interrupts
}

# pools_out: "POOL INFLIGHT" for each traced page pool whose last release still had pages out (a
# negative count, more pages back than went out, too); pools_seen: how many pools were traced.
pool_releases() {
	awk '/page_pool_release:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^page_pool=/) p = $i; if ($i ~ /^inflight=/) n = substr($i, 10) } last[p] = n }
		END { for (p in last) print p, last[p] }' /sys/kernel/tracing/trace
}
pools_out() { pool_releases | awk '$2 != 0'; }
pools_seen() { pool_releases | wc -l; }

# Kernel log lines no run may show (outside a deliberate fault window, see fault_window).
BADLOG='WARNING:|BUG:|Oops|Call Trace|general protection|soft lockup|blocked for more than|NETDEV WATCHDOG|rcu.*(stall|self-detected)|page_pool.*leak|swiotlb.*(full|overflow)|onic: sim: (driver leaked|the model recorded)|onic: Rust panic|TX queue [0-9]+ timed out|ring error|queue [0-9]+ restarted|restart(ing)? (the queue|the interface|failed)'
# ... nor a report of the memory checks the xtask boots with (slub_debug, page_poison, KFENCE;
# xtask/src/vm.rs MEMORY_CHECKS): a slab cache's "BUG <cache> (...): <what>", a page whose
# poison was overwritten while free, a bad page, a corrupted list, a double free.
# ... nor a fault of the IOMMU (a device access to an address the driver did not map for it).
BADLOG="$BADLOG"'|DMAR: \[|DMAR: DRHD: handling fault|IO_PAGE_FAULT'
# Reports of the kernel's checkers (the debug kernel, os-linux/vm/README.md), checked over the
# whole log. DMA API debugging's reports name the driver and the device ("DMA-API: onic
# 0000:01:00.0: device driver ..."); its boot lines ("DMA-API: preallocated ...") do not.
CHECKERS='BUG: sleeping function|Invalid wait context|BUG: KASAN|suspicious RCU usage|lock order detected|locking dependency|inconsistent lock state|recursive locking|INFO: trying to register non-static key|turning off the locking correctness validator|ODEBUG: |DMA-API: ([^ ]+ [^ ]+: |debugging out of memory)'
BADLOG="$BADLOG|$CHECKERS"
BADLOG="$BADLOG"'|BUG [^ ]+ \(|Poison overwritten|Redzone|Object already free|Freepointer corrupt|Padding overwritten|slab error|[Ff]reelist|pagealloc: (memory corruption|single bit error)|[Bb]ad page (state|map)|list_(add|del) corruption|double free|kernel BUG|KFENCE: '

finish() {
	# Pages the stack still holds come back when it lets them go (a socket's queues, a TCP orphan
	# timing out): each pool gets up to 60 s more. A page never given back is a leak, whether
	# the driver or the kernel kept it; the kernel's own "stalled pool shutdown" warning after
	# 60 s is left to this check, which also covers the pools destroyed in the run's last minute.
	n=0
	while [ $n -lt 60 ] && [ -n "$(pools_out)" ]; do
		sleep 1
		n=$((n + 1))
	done
	pools_out >/tmp/out
	np=$(pools_seen)
	if [ -s /tmp/out ] || [ "$np" = 0 ] || grep -q "^overrun: [1-9]" /sys/kernel/tracing/per_cpu/cpu*/stats; then
		fail "every page pool got all its pages back ($np pools traced; pools with pages out, or a trace overrun:)"
		show
		grep "^overrun" /sys/kernel/tracing/per_cpu/cpu*/stats | sed 's/^/    | /'
	else
		pass "every page pool got all its pages back ($np pools traced, destroyed and released)"
	fi
	if [ $MODE = pci ]; then
		# What the card itself saw, over the whole run (fault windows included: none of the
		# faults makes the driver do what the hardware refuses).
		V=$(ctl_rd $CTL_VIOLATIONS)
		check "the card recorded no driver mistake (model violations: $V; the QEMU log has each)" test "$V" = 0
		F=$(ctl_rd $CTL_BUS_FAULTS)
		check "no device access was refused by the bus or the IOMMU ($F)" test "$F" = 0
		M=$(ctl_rd $CTL_BAD_MMIO)
		check "every BAR access was an aligned 32-bit one ($M others)" test "$M" = 0
	fi
	dmesg >/tmp/dmesg
	echo "---- kernel log ----"
	cat /tmp/dmesg
	echo "---- end of kernel log ----"
	# Lines between the markers of a deliberate fault are checked by that test itself.
	sed '/onic-vm: fault window begins/,/onic-vm: fault window ends/d' /tmp/dmesg >/tmp/dmesg.clean
	if grep -E "$BADLOG" /tmp/dmesg.clean >/tmp/out; then
		fail "kernel log free of WARN/BUG/Oops/lockups/hung tasks/NETDEV WATCHDOG/page_pool leaks/model violations/memory-check reports"
		show
	else
		pass "kernel log free of WARN/BUG/Oops/lockups/hung tasks/NETDEV WATCHDOG/page_pool leaks/model violations/memory-check reports"
	fi
	# The kernel's own checkers (atomic sleep, lockdep, KASAN, RCU, debugobjects, DMA API) report
	# a driver bug whenever it happens: fault windows included.
	if grep -E "$CHECKERS" /tmp/dmesg >/tmp/out; then
		fail "no report of the kernel's checkers, fault windows included"
		show
	else
		pass "no report of the kernel's checkers, fault windows included"
	fi
	echo "VM-TEST SUMMARY: checks that passed $PASSES, checks that failed $FAILS"
	if [ "$FAILS" = 0 ]; then
		echo "VM-TEST PASS"
		code=16
	else
		echo "VM-TEST FAIL"
		code=17
	fi
	printf "\\$(printf %o $code)" | dd of=/dev/port bs=1 seek=244 count=1 2>/dev/null
	poweroff -f
}

echo "== onic VM test on Linux $(uname -r)"
# The memory checks are really on (their kernel log check above would pass silently otherwise).
check "slab objects are poisoned and red-zoned (slub_debug)" sh -c \
	'[ "$(cat /sys/kernel/slab/kmalloc-256/poison)" = 1 ] && [ "$(cat /sys/kernel/slab/kmalloc-256/red_zone)" = 1 ]'
check "freed pages are poisoned (page_poison)" sh -c 'dmesg | grep -q "CONFIG_PAGE_POISONING is on"'
if grep -q kfence.sample_interval /proc/cmdline; then
	check "KFENCE samples slab objects" sh -c 'dmesg | grep -q "kfence: initialized"'
fi
check "page pool releases are traced" grep -qx 1 /sys/kernel/tracing/events/page_pool/page_pool_release/enable

# The harness's own check (cargo xtask vm-test --expect-fail): a failing check must fail the run.
if grep -qw onic_vm_deliberate_fail /proc/cmdline; then
	fail "deliberate failure (onic_vm_deliberate_fail on the kernel command line)"
	finish
fi

# ---- load, netdevs, driver info, statistics names
check "insmod onic.ko $SIMARGS" insmod $KO $SIMARGS
if [ $MODE = sim-dma ]; then
	check "the ports map memory through the kernel DMA API" sh -c 'dmesg | grep -q "memory through the kernel DMA API"'
	check "ethtool -i names the platform device" sh -c 'ethtool -i onicsim0 | grep -qx "bus-info: onic-sim.0"'
fi
card_netdevs
# ---- the PCI card: probe, BARs, MSI-X, DMA path (qemu-card/; the model behind QEMU PCI functions)
if [ $MODE = pci ]; then
	check "the card's two functions got netdevs ($IF0, $IF1)" test -n "$IF0" -a -n "$IF1"
	check "the test-control window answers (magic ONIC)" test "$(ctl_rd 0)" = $((0x43494e4f))
	PF0=$(basename "$(pci_dev $PF0ID)")
	PF1=$(basename "$(pci_dev $PF1ID)")
	check "ethtool -i gives PF0's PCI address as bus-info ($PF0)" sh -c "ethtool -i $IF0 | grep -qx 'bus-info: $PF0'"
	for d in $PF0 $PF1; do
		$LSPCI -vv -s $d >/tmp/lspci 2>&1
		check "lspci -vv: $d is bound by onic" grep -q 'Kernel driver in use: onic' /tmp/lspci
		check "lspci -vv: $d has MSI-X enabled" grep -q 'MSI-X: Enable+' /tmp/lspci
		check "lspci -vv: $d decodes memory and is a bus master" grep -q 'Control: .*Mem+ BusMaster+' /tmp/lspci
		check "lspci -vv: $d maps BAR0 and BAR2 (64-bit)" sh -c "grep -q 'Region 0: Memory at .* (64-bit' /tmp/lspci && grep -q 'Region 2: Memory at .* (64-bit.*\[size=4M\]' /tmp/lspci"
		check "lspci -vv: $d is a PCIe endpoint with relaxed ordering, extended tags and 512-byte reads (hardware.md §1.4)" sh -c \
			"grep -q 'Express (v2) Endpoint' /tmp/lspci && grep -q 'RlxdOrd+ ExtTag+' /tmp/lspci && grep -q 'MaxReadReq 512 bytes' /tmp/lspci"
	done
	sed 's/^/    | /' /tmp/lspci
	check "/proc/interrupts: $IF0 has 8 queue vectors, the user and the error vector" sh -c \
		"[ \$(grep -Ec ' $IF0-q[0-7]\$' /proc/interrupts) = 8 ] && grep -q ' $IF0-user\$' /proc/interrupts && grep -q ' $IF0-err\$' /proc/interrupts"
	check "/proc/interrupts: $IF1 has 8 queue vectors and the user vector, no error vector" sh -c \
		"[ \$(grep -Ec ' $IF1-q[0-7]\$' /proc/interrupts) = 8 ] && grep -q ' $IF1-user\$' /proc/interrupts && ! grep -q ' $IF1-err\$' /proc/interrupts"
	if grep -qw intel_iommu=on /proc/cmdline; then
		check "the IOMMU translates the card's DMA (DMAR on, strict invalidation)" sh -c \
			"dmesg | grep -q 'DMAR: IOMMU enabled' && dmesg | grep -q 'TLB invalidation policy: strict' && [ -e /sys/bus/pci/devices/$PF0/iommu_group ]"
	else
		check "every mapping bounces through swiotlb (swiotlb=force)" sh -c 'dmesg | grep -q "software IO TLB"'
	fi
fi
check "netdev $IF0 appears" $IP link show $IF0
check "netdev $IF1 appears" $IP link show $IF1
check "ethtool -i reports driver onic" sh -c "ethtool -i $IF0 | grep -qx 'driver: onic'"
ethtool -S $IF0 >/tmp/stats 2>&1
sed -n '2,72p' /tmp/stats | sed 's/^ *//; s/:.*//' >/tmp/names71
same "ethtool -S lists the reference driver's 71 names first, in order" /tmp/names71 /etc/onic/stats71.txt
check "ethtool -S then lists per-queue counters" grep -q 'rx0_packets' /tmp/stats
# ---- devlink: one instance per function (the PCI function; in simulation its platform device)
if [ $MODE = pci ]; then DL0=pci/$PF0 DL1=pci/$PF1; else DL0=platform/onic-sim.0 DL1=platform/onic-sim.1; fi
devlink dev info $DL0 >/tmp/dlinfo 2>&1
sed 's/^/    | /' /tmp/dlinfo
check "devlink dev info $DL0: driver onic" grep -Eq '^[[:space:]]*driver onic$' /tmp/dlinfo
check "devlink dev info: the board's PCI IDs (board.id 10ee:903f)" grep -Eq '^[[:space:]]*board.id 10ee:903f$' /tmp/dlinfo
check "devlink dev info: the shell's build stamp (fw.shell.build, BUILD_STATUS) and the CMAC's version 3.1" sh -c \
	"grep -Eq '^[[:space:]]*fw.shell.build [0-9a-f]{8}$' /tmp/dlinfo && grep -Eq '^[[:space:]]*fw.cmac 3.1$' /tmp/dlinfo"
check "devlink dev info $DL1: PF1's board.id 10ee:913f" sh -c "devlink dev info $DL1 | grep -Eq 'board.id 10ee:913f'"
devlink health show >/tmp/dlhealth 2>&1
sed 's/^/    | /' /tmp/dlhealth
check "devlink health: reporters tx and rx on both functions, healthy" sh -c \
	"[ \$(grep -Ec 'reporter (tx|rx)' /tmp/dlhealth) = 4 ] && [ \$(grep -c 'state healthy error 0 recover 0' /tmp/dlhealth) = 4 ]" 
check "ethtool -S lists the page-pool counters" grep -q 'rx_pp_alloc_fast' /tmp/stats
# stat NAME DEV [NETNS-PREFIX...]: the value of one ethtool -S entry.
stat() {
	n=$1
	d=$2
	shift 2
	"$@" ethtool -S "$d" | sed -n "s/^ *$n: //p"
}

# ---- XDP_REDIRECT (both ports still in the first namespace, so the program can name the other
# port by its index): ARP requests out of $IF1 arrive at $IF0, whose program redirects
# each once to $IF1 (ndo_xdp_xmit), which sends it back over the cable; the second arrival is
# dropped by the program.
check "ip link set $IF0 up (redirect test)" $IP link set $IF0 up
check "ip link set $IF1 up (redirect test)" $IP link set $IF1 up
I0=$(cat /sys/class/net/$IF0/ifindex)
I1=$(cat /sys/class/net/$IF1/ifindex)
check "$IF1 is registered right after $IF0 (ifindex $I0, $I1)" test "$I1" = $((I0 + 1))
check "attach xdp_redirect.o natively (xdpdrv) on $IF0" $IP link set dev $IF0 xdpdrv obj /xdp/xdp_redirect.o sec xdp
check "ip link shows the native XDP program" sh -c "$IP link show $IF0 | grep -q 'xdp '"
$IP addr add 198.51.100.2/24 dev $IF1
# Five requests, whatever the host's speed: with a -w deadline arping would count replies
# (there are none: the program drops the second arrival) and send one a second until the
# deadline, four or five of them. timeout is the step's deadline.
timeout $((20 * SLOW)) arping -c 5 -I $IF1 198.51.100.1 >/dev/null 2>&1
$IP addr del 198.51.100.2/24 dev $IF1
sleep 1
R0=$(stat rx_xdp_redirect $IF0)
X1=$(stat tx_xdp_xmit $IF1)
D0=$(stat rx_xdp_drop $IF0)
check "$IF0 redirected the ARP requests (rx_xdp_redirect=$R0)" test "${R0:-0}" -ge 5
check "$IF1 sent them through ndo_xdp_xmit (tx_xdp_xmit=$X1)" test "${X1:-0}" -ge 5
check "their second arrival was dropped by the program (rx_xdp_drop=$D0)" test "${D0:-0}" -ge 5
check "detach xdp_redirect.o" $IP link set dev $IF0 xdpdrv off

# ---- ndo_xdp_xmit under load: xdp-bench (Debian's xdp-tools) redirects every frame $IF0
# receives out of $IF1, and pktgen floods $IF0 from $IF1 at full rate; each frame comes back
# over the cable and goes round again, so $IF1's ndo_xdp_xmit runs with its rings full (what
# it cannot queue stays with the kernel, which frees it). The loop runs until $IF1 has sent
# 20000 frames through ndo_xdp_xmit (or 30 s pass: the deadline), then it is broken. The rate
# is printed, not checked: under TCG it follows the host's load.
insmod /lib/modules/pktgen.ko
PG=/proc/net/pktgen
X0=$(stat tx_xdp_xmit $IF1)
E0=$(stat tx_xdp_xmit_errors $IF1)
timeout $((40 * SLOW)) xdp-bench redirect -i 1 $IF0 $IF1 >/tmp/xb.log 2>&1 &
XB=$!
# pktgen starts once the program is attached (2 s on Debian's kernels, more on the debug one).
n=0
while [ $n -lt $((30 * SLOW)) ] && ! $IP link show $IF0 | grep -q xdp; do sleep 1; n=$((n + 1)); done
echo "rem_device_all" >$PG/kpktgend_0
echo "add_device $IF1" >$PG/kpktgend_0
for c in "count 200000" "pkt_size 60" "delay 0" "dst_mac $(cat /sys/class/net/$IF0/address)" "dst 198.51.100.1" "udp_dst_min 9" "udp_dst_max 9"; do
	echo "$c" >$PG/$IF1
done
timeout 60 sh -c "echo start >$PG/pgctrl" &
PGJ=$!
n=0
while [ $n -lt $((30 * SLOW)) ] && [ $(($(stat tx_xdp_xmit $IF1) - X0)) -lt 20000 ]; do
	sleep 1
	n=$((n + 1))
done
echo stop >$PG/pgctrl
wait $PGJ 2>/dev/null
kill -INT $XB 2>/dev/null
wait $XB 2>/dev/null
sleep 2
X1=$(stat tx_xdp_xmit $IF1)
E1=$(stat tx_xdp_xmit_errors $IF1)
echo "    | $IF1 ndo_xdp_xmit: $((X1 - X0)) frames sent in about $n s, $((E1 - E0)) refused (rings full); pktgen: $(sed -n 's/^ *pkts-sofar: \([0-9]*\).*/\1/p' $PG/$IF1) sent"
check "ndo_xdp_xmit carried a redirect loop of 20000 frames within $((30 * SLOW)) s ($((X1 - X0)) frames)" test $((X1 - X0)) -ge 20000
check "xdp-bench's program is gone from $IF0" sh -c "! $IP link show $IF0 | grep -q 'xdp'"
echo "rem_device_all" >$PG/kpktgend_0
rmmod pktgen
P0=$(cat /sys/class/net/$IF0/statistics/rx_packets)
$IP addr add 198.51.100.2/24 dev $IF1
timeout $((20 * SLOW)) arping -c 3 -I $IF1 198.51.100.1 >/dev/null 2>&1
$IP addr del 198.51.100.2/24 dev $IF1
check "after the loop, frames from $IF1 still reach $IF0's stack" test "$(cat /sys/class/net/$IF0/statistics/rx_packets)" -ge $((P0 + 3))

# ---- the same XDP objects as in `onic run --xdp-obj`: the shared capture replayed out of
# $IF1 into $IF0 with each object attached natively; the frames the stack received and
# the frames $IF0 sent back must be, frame for frame, what onic run gives (os-linux/vm/README.md)
for d in $IF0 $IF1; do
	echo 1 >/proc/sys/net/ipv6/conf/$d/disable_ipv6
	# Rings that hold the whole capture: a poll delayed by a busy host drops nothing.
	ethtool -G $d rx 1023 tx 1023
done
# xdpctr NAME DEV: one ethtool -S counter.
xdpctr() { ethtool -S "$2" | sed -n "s/^ *$1: //p"; }
# Program and the rx_xdp_pass/drop/tx/redirect changes onic run counts for it on the capture
# (xdp_features' are not compared: its maps and verdicts depend on the CPU count).
for row in "xdp_pass 300 0 0 0" "xdp_drop 0 300 0 0" "xdp_swap 0 0 300 0" "xdp_drop_udp 200 100 0 0" \
	"xdp_tx 250 0 50 0" "xdp_redirect 275 25 0 25" "xdp_count 300 0 0 0" "xdp_features - - - -"; do
	set -- $row
	P=$1
	want="$2 $3 $4 $5"
	mkdir -p /tmp/r/$P
	before="$(xdpctr rx_xdp_pass $IF0) $(xdpctr rx_xdp_drop $IF0) $(xdpctr rx_xdp_tx $IF0) $(xdpctr rx_xdp_redirect $IF0)"
	if timeout 60 onic_replay run /replay/$P.o $P $IF0 $IF1 /replay/xdp-shared.pcap /tmp/r/$P >/tmp/out 2>&1 &&
		onic_replay digest /tmp/r/$P/pass.pcap >/tmp/r/$P/pass.digest &&
		onic_replay digest /tmp/r/$P/port0-out.pcap >/tmp/r/$P/port0-out.digest; then
		same "$P: the stack received what onic run passes ($(cat /tmp/out))" /tmp/r/$P/pass.digest /replay/expected/$P.pass.digest
		same "$P: $IF0 sent what onic run sends (XDP_TX)" /tmp/r/$P/port0-out.digest /replay/expected/$P.port0-out.digest
	else
		fail "$P: replay through the kernel"
		show
	fi
	ethtool -S $IF0 | grep -E '^ *(rx_missed_errors|stat_adapt_rx_drop|rx_dropped)' | grep -v ': 0$' | sed 's/^/    | /'
	after="$(xdpctr rx_xdp_pass $IF0) $(xdpctr rx_xdp_drop $IF0) $(xdpctr rx_xdp_tx $IF0) $(xdpctr rx_xdp_redirect $IF0)"
	got=$(echo "$before $after" | awk '{ print $5 - $1, $6 - $2, $7 - $3, $8 - $4 }')
	if [ "$2" != - ]; then
		check "$P: XDP verdict counters pass/drop/tx/redirect +$got as in onic run (+$want)" test "$got" = "$want"
	fi
done
grep '^flows ' /tmp/r/xdp_count/maps.txt >/tmp/flows
same "xdp_count: the kernel's per-flow map equals onic run's" /tmp/flows /replay/expected/xdp_count.flows.txt
$IP link set $IF0 down
$IP link set $IF1 down
for d in $IF0 $IF1; do ethtool -G $d rx 63 tx 63; done

# ---- each port in its own namespace, addresses, ping across the model's cable
$IP netns add a
$IP netns add b
$IP link set $IF0 netns a
$IP link set $IF1 netns b
A="$IP netns exec a"
B="$IP netns exec b"
NB="nsenter --net=/run/netns/b"
$IP -n a link set lo up
$IP -n b link set lo up
# A TCP socket whose process is killed while its port is going away (rmmod under TCP load) lives
# on as an orphan that retries its FIN; the default (8 retries) keeps it, and any received pages in
# its queues, for minutes. One retry ends it within seconds, so those pages are back before finish.
for ns in a b; do $IP netns exec $ns sh -c 'echo 1 >/proc/sys/net/ipv4/tcp_orphan_retries'; done
$IP -n a addr add 192.0.2.1/24 dev $IF0
$IP -n b addr add 192.0.2.2/24 dev $IF1
check "ip link set $IF0 up" $IP -n a link set $IF0 up
check "ip link set $IF1 up" $IP -n b link set $IF1 up
sleep 1
check "ping a -> b across the model's cable" $A ping -c 3 -W 2 192.0.2.2
check "ping b -> a" $B ping -c 2 -W 2 192.0.2.1
check "ethtool -S counts the frames" sh -c "$B ethtool -S $IF1 | grep -Eq 'stat_rx_total_pkts: [1-9]'"

# ---- the standard statistic groups (ethtool -S --groups, -I --show-pause) after known traffic:
# the CMAC's counters as IEEE 802.3 / RMON name them (core::stats::mac, docs/statistics.md).
# grp NAME DEV NETNS-PREFIX...: one counter of the four groups; pstat NAME DEV NETNS-PREFIX...:
# one line of -I --show-pause (a statistic or the RX/TX setting).
GROUPS="eth-mac eth-phy eth-ctrl rmon"
grp() {
	n=$1
	d=$2
	shift 2
	"$@" ethtool -S "$d" --groups $GROUPS | sed -n "s/^[[:space:]]*$n:[[:space:]]*//p"
}
pstat() {
	n=$1
	d=$2
	shift 2
	"$@" ethtool -I --show-pause "$d" | sed -n "s/^[[:space:]]*$n:[[:space:]]*//p"
}
# settle NAME DEV WANT NETNS-PREFIX...: waits up to 10 s (times the slow factor) until group
# counter NAME reaches WANT (frames still on their way through the model's rings).
settle() {
	sn=$1
	sd=$2
	sw=$3
	shift 3
	n=0
	while [ $n -lt $((50 * SLOW)) ] && [ "$(grp "$sn" "$sd" "$@")" != "$sw" ]; do sleep 0.2; n=$((n + 1)); done
}
$A ethtool -S $IF0 --groups $GROUPS >/tmp/groups 2>&1
check "ethtool -S --groups $GROUPS answers" grep -q 'FramesReceivedOK' /tmp/groups
sed 's/^/    | /' /tmp/groups
check "eth-mac, eth-phy, eth-ctrl and rmon are all there" sh -c \
	"grep -q 'eth-mac-FramesTransmittedOK' /tmp/groups && grep -q 'eth-phy-SymbolErrorDuringCarrier' /tmp/groups &&
	 grep -q 'eth-ctrl-MACControlFramesReceived' /tmp/groups && grep -q 'rmon-etherStatsUndersizePkts' /tmp/groups"
check "rmon lists the CMAC's histogram ranges, 64 to 9215 bytes" sh -c \
	"grep -q 'rx-rmon-etherStatsPkts64to64Octets' /tmp/groups && grep -q 'rx-rmon-etherStatsPkts1519to2047Octets' /tmp/groups &&
	 grep -q 'tx-rmon-etherStatsPkts8192to9215Octets' /tmp/groups"
check "counters the CMAC lacks are not reported (no AlignmentErrors, no collisions)" sh -c \
	"! grep -Eq 'AlignmentErrors|Collision' /tmp/groups"
# 7 pings of 600 bytes: 646 bytes on the wire each way (600 + ICMP 8 + IPv4 20 + Ethernet 14 +
# FCS 4), the only frames of the run in the 512-1023 bucket.
H=rmon-etherStatsPkts512to1023Octets
T0=$(grp tx-$H $IF0 $A)
R1=$(grp rx-$H $IF1 $B)
T1=$(grp tx-$H $IF1 $B)
R0=$(grp rx-$H $IF0 $A)
OK1=$(grp eth-mac-FramesReceivedOK $IF1 $B)
OC1=$(grp eth-mac-OctetsReceivedOK $IF1 $B)
check "7 pings of 600 bytes a -> b" timeout $((20 * SLOW)) $A $PING -c 7 -i 0.2 -s 600 -W 2 192.0.2.2
settle rx-$H $IF0 $((R0 + 7)) $A
check "rmon: $IF0 sent 7 frames of 512-1023 bytes (+$(($(grp tx-$H $IF0 $A) - T0)))" test $(($(grp tx-$H $IF0 $A) - T0)) = 7
check "rmon: $IF1 received them (+$(($(grp rx-$H $IF1 $B) - R1)))" test $(($(grp rx-$H $IF1 $B) - R1)) = 7
check "rmon: $IF1 sent 7 replies of 512-1023 bytes (+$(($(grp tx-$H $IF1 $B) - T1)))" test $(($(grp tx-$H $IF1 $B) - T1)) = 7
check "rmon: $IF0 received them (+$(($(grp rx-$H $IF0 $A) - R0)))" test $(($(grp rx-$H $IF0 $A) - R0)) = 7
OK1=$(($(grp eth-mac-FramesReceivedOK $IF1 $B) - OK1))
OC1=$(($(grp eth-mac-OctetsReceivedOK $IF1 $B) - OC1))
check "eth-mac: FramesReceivedOK (+$OK1) and OctetsReceivedOK (+$OC1) of $IF1 cover them" \
	test $OK1 -ge 7 -a $OC1 -ge $((7 * 646))
check "eth-phy: no code violations on the model's cable" test "$(grp eth-phy-SymbolErrorDuringCarrier $IF0 $A)" = 0
# Frames with a bad FCS: counted by whichever port received them, dropped there.
fcs() { echo $(($(grp eth-mac-FrameCheckSequenceErrors $IF0 $A) + $(grp eth-mac-FrameCheckSequenceErrors $IF1 $B))); }
F0=$(fcs)
if [ $MODE = pci ]; then ctl_wr $CTL_BAD_FCS 3; else echo 3 >/sys/module/onic/parameters/sim_bad_fcs; fi
timeout $((20 * SLOW)) $A $PING -c 8 -i 0.2 -W 1 192.0.2.2 >/dev/null 2>&1
check "eth-mac: 3 frames with a bad FCS counted in FrameCheckSequenceErrors (+$(($(fcs) - F0)))" test $(($(fcs) - F0)) = 3
# Pause frames: 5 sent out of $IF1 (MAC control, 64 bytes on the wire), consumed by $IF0's MAC.
PT1=$(pstat tx_pause_frames $IF1 $B)
PR0=$(pstat rx_pause_frames $IF0 $A)
CT1=$(grp eth-ctrl-MACControlFramesTransmitted $IF1 $B)
CR0=$(grp eth-ctrl-MACControlFramesReceived $IF0 $A)
check "5 pause frames out of $IF1" timeout $((20 * SLOW)) $B onic_replay pause $IF1 5
settle eth-ctrl-MACControlFramesReceived $IF0 $((CR0 + 5)) $A
$A ethtool -I --show-pause $IF0 >/tmp/pause 2>&1
sed 's/^/    | /' /tmp/pause
check "--show-pause: global pause on both ways, no autonegotiation" sh -c \
	"grep -Eq '^RX:[[:space:]]+on' /tmp/pause && grep -Eq '^TX:[[:space:]]+on' /tmp/pause && grep -Eq '^Autonegotiate:[[:space:]]+off' /tmp/pause"
check "--show-pause: $IF1 sent 5 pause frames (+$(($(pstat tx_pause_frames $IF1 $B) - PT1)))" test $(($(pstat tx_pause_frames $IF1 $B) - PT1)) = 5
check "--show-pause: $IF0 received them (+$(($(pstat rx_pause_frames $IF0 $A) - PR0)))" test $(($(pstat rx_pause_frames $IF0 $A) - PR0)) = 5
check "eth-ctrl: MAC control frames, 5 sent and 5 received (+$(($(grp eth-ctrl-MACControlFramesTransmitted $IF1 $B) - CT1)), +$(($(grp eth-ctrl-MACControlFramesReceived $IF0 $A) - CR0)))" \
	test $(($(grp eth-ctrl-MACControlFramesTransmitted $IF1 $B) - CT1)) = 5 -a $(($(grp eth-ctrl-MACControlFramesReceived $IF0 $A) - CR0)) = 5

# ---- FEC: --show-fec / --set-fec on the CMACs' RS-FEC, the decoder's codeword counters
# (-I --show-fec), then the CMAC's near-end loopback (-K loopback) and the self-tests (-t).
# fecstat NAME DEV NETNS-PREFIX...: one statistic of -I --show-fec.
fecstat() {
	n=$1
	d=$2
	shift 2
	"$@" ethtool -I --show-fec "$d" | sed -n "s/^[[:space:]]*$n:[[:space:]]*//p" | head -1
}
# carrier WANT DEV NETNS-PREFIX...: waits up to 10 s (times the slow factor) until the carrier of
# DEV is WANT (yes/no); the link work polls the CMAC every 0.5 s.
carrier() {
	cw=$1
	cd=$2
	shift 2
	n=0
	while [ $n -lt $((50 * SLOW)) ] && ! "$@" ethtool "$cd" | grep -q "Link detected: $cw"; do sleep 0.2; n=$((n + 1)); done
	"$@" ethtool "$cd" | grep -q "Link detected: $cw"
}
$A ethtool --show-fec $IF0 >/tmp/fec 2>&1
sed 's/^/    | /' /tmp/fec
check "--show-fec: RS-FEC configured and active after the bring-up (rs_fec=1)" sh -c \
	"grep -Eq 'Configured FEC encodings:[[:space:]]+RS' /tmp/fec && grep -Eq 'Active FEC encoding:[[:space:]]+RS' /tmp/fec"
refuse "--set-fec encoding baser is refused (the CMAC has RS-FEC only)" $A ethtool --set-fec $IF0 encoding baser
refuse "--set-fec encoding rs off (two modes) is refused" $A ethtool --set-fec $IF0 encoding rs off
check "and RS-FEC still runs" sh -c "$A ethtool --show-fec $IF0 | grep -Eq 'Active FEC encoding:[[:space:]]+RS'"
check "--set-fec encoding off on $IF0 alone" $A ethtool --set-fec $IF0 encoding off
check "--show-fec: off configured and active on $IF0" sh -c \
	"$A ethtool --show-fec $IF0 | grep -Eq 'Configured FEC encodings:[[:space:]]+Off' && $A ethtool --show-fec $IF0 | grep -Eq 'Active FEC encoding:[[:space:]]+Off'"
check "ends that disagree on FEC do not link: $IF0 loses its carrier" carrier no $IF0 $A
check "and so does $IF1" carrier no $IF1 $B
refuse "no ping across the disagreeing ends" $A $PING -c 2 -W 1 192.0.2.2
check "--set-fec encoding off on $IF1 too" $B ethtool --set-fec $IF1 encoding off
check "both ends without FEC link again ($IF0)" carrier yes $IF0 $A
check "($IF1)" carrier yes $IF1 $B
check "ping without FEC" $A $PING -c 2 -W 2 192.0.2.2
check "--set-fec encoding auto on both" sh -c "$A ethtool --set-fec $IF0 encoding auto && $B ethtool --set-fec $IF1 encoding auto"
check "--show-fec: auto configured, RS active" sh -c \
	"$B ethtool --show-fec $IF1 | grep -Eq 'Configured FEC encodings:[[:space:]]+Auto' && $B ethtool --show-fec $IF1 | grep -Eq 'Active FEC encoding:[[:space:]]+RS'"
check "both ends with RS-FEC link ($IF0)" carrier yes $IF0 $A
check "($IF1)" carrier yes $IF1 $B
check "ping with RS-FEC" $A $PING -c 2 -W 2 192.0.2.2
# Codeword errors: 4 frames the decoder corrects, then 2 it cannot (those arrive with a bad FCS
# and are dropped), counted by whichever port received them.
fecsum() { echo $(($(fecstat $1 $IF0 $A) + $(fecstat $1 $IF1 $B))); }
$A ethtool -I --show-fec $IF0 >/tmp/fec 2>&1
sed 's/^/    | /' /tmp/fec
check "-I --show-fec reports the codeword counters" sh -c "grep -q corrected_blocks /tmp/fec && grep -q uncorrectable_blocks /tmp/fec"
C0=$(fecsum corrected_blocks)
U0=$(fecsum uncorrectable_blocks)
F0=$(fcs)
if [ $MODE = pci ]; then ctl_wr $CTL_FEC_ERRORS $((2 << 16 | 4)); else echo $((2 << 16 | 4)) >/sys/module/onic/parameters/sim_fec_errors; fi
timeout $((20 * SLOW)) $A $PING -c 10 -i 0.2 -W 1 192.0.2.2 >/dev/null 2>&1
check "FEC: 4 corrected codewords counted (+$(($(fecsum corrected_blocks) - C0)))" test $(($(fecsum corrected_blocks) - C0)) = 4
check "FEC: 2 uncorrectable codewords counted (+$(($(fecsum uncorrectable_blocks) - U0)))" test $(($(fecsum uncorrectable_blocks) - U0)) = 2
check "FEC: the 2 uncorrectable frames arrived with a bad FCS (+$(($(fcs) - F0)))" test $(($(fcs) - F0)) = 2
# Loopback: what $IF0 sends comes back to it, nothing crosses the cable.
check "-k: loopback off" sh -c "$A ethtool -k $IF0 | grep -Eq '^loopback: off$'"
check "-K loopback on" $A ethtool -K $IF0 loopback on
check "-k: loopback on" sh -c "$A ethtool -k $IF0 | grep -Eq '^loopback: on$'"
check "$IF0 keeps its link in loopback" carrier yes $IF0 $A
LT0=$(grp eth-mac-FramesTransmittedOK $IF0 $A)
LR0=$(grp eth-mac-FramesReceivedOK $IF0 $A)
LB1=$(grp eth-mac-FramesReceivedOK $IF1 $B)
refuse "no ping across the cable in loopback" $A $PING -c 3 -W 1 192.0.2.2
# The stack may still be sending (ARP retries): the two counts are read until they agree, for up
# to 10 s (times the slow factor); a port that heard anything but itself never gets there.
n=0
while :; do
	LT=$(($(grp eth-mac-FramesTransmittedOK $IF0 $A) - LT0))
	LR=$(($(grp eth-mac-FramesReceivedOK $IF0 $A) - LR0))
	[ $LT = $LR ] || [ $n -ge $((50 * SLOW)) ] && break
	sleep 0.2
	n=$((n + 1))
done
check "loopback: $IF0 received what it sent ($LT frames sent, $LR received)" test $LT -ge 1 -a $LR = $LT
check "loopback: $IF1 received none of it (+$(($(grp eth-mac-FramesReceivedOK $IF1 $B) - LB1)))" \
	test $(($(grp eth-mac-FramesReceivedOK $IF1 $B) - LB1)) = 0
check "-K loopback off" $A ethtool -K $IF0 loopback off
check "$IF0 has its link over the cable again" carrier yes $IF0 $A
check "ping across the cable after loopback" $A $PING -c 2 -W 2 192.0.2.2
# ethtool -t: the register test, and (offline, the default) the loopback test.
$A ethtool -t $IF0 >/tmp/t 2>&1
TS=$?
sed 's/^/    | /' /tmp/t
check "ethtool -t: both tests pass (exit $TS)" sh -c \
	"test $TS = 0 && grep -q 'The test result is PASS' /tmp/t && grep -Eq '^Register test +\(online\)[[:space:]]+0$' /tmp/t && grep -Eq '^Loopback test +\(offline\)[[:space:]]+0$' /tmp/t"
check "ethtool -t logged 8 of 8 loopback frames back" sh -c "dmesg | grep -q '$IF0: loopback test: 8 of 8 frames back intact, 0 others'"
check "ethtool -t put the loopback setting back (off)" sh -c "$A ethtool -k $IF0 | grep -Eq '^loopback: off$'"
check "ethtool -t online runs the register test only" sh -c "$A ethtool -t $IF0 online | grep -q 'The test result is PASS'"
# The loopback test notices lost frames: 3 of its frames arrive with uncorrectable codewords.
if [ $MODE = pci ]; then ctl_wr $CTL_FEC_ERRORS $((3 << 16)); else echo $((3 << 16)) >/sys/module/onic/parameters/sim_fec_errors; fi
$A ethtool -t $IF0 >/tmp/t 2>&1
TS=$?
sed 's/^/    | /' /tmp/t
check "ethtool -t fails when loopback frames are lost" sh -c \
	"grep -q 'The test result is FAIL' /tmp/t && grep -Eq '^Register test +\(online\)[[:space:]]+0$' /tmp/t && grep -Eq '^Loopback test +\(offline\)[[:space:]]+[1-9]' /tmp/t"
if [ $MODE = pci ]; then ctl_wr $CTL_FEC_ERRORS 0; else echo 0 >/sys/module/onic/parameters/sim_fec_errors; fi
check "ping after the self-tests" $A $PING -c 2 -W 2 192.0.2.2

# ---- ethtool round trips; bad values rejected with an error and no change
E="$A ethtool"
check "ethtool -x: default key is the RTL reset key" sh -c "$E -x $IF0 | grep -q '17:14:e3:d6:7e:c8'"
check "ethtool -L combined 4" $E -L $IF0 combined 4
# (the "Current hardware settings" part of -l / -g)
cur() { sed -n '/^Current/,$p'; }
check "ethtool -l shows 4 combined" sh -c "$E -l $IF0 | sed -n '/^Current/,\$p' | grep -Eq '^Combined:[[:space:]]+4$'"
check "ethtool -X equal 2" $E -X $IF0 equal 2
check "ethtool -x: table uses queues 0 and 1 only" sh -c "$E -x $IF0 | grep -E '^ +[0-9]+:' | grep -Eq ' 1 ' && ! $E -x $IF0 | grep -E '^ +[0-9]+:' | grep -Eq ' [2-9] '"
KEY=01:02:03:04:05:06:07:08:09:0a:0b:0c:0d:0e:0f:10:11:12:13:14:15:16:17:18:19:1a:1b:1c:1d:1e:1f:20:21:22:23:24:25:26:27:28
check "ethtool -X hkey" $E -X $IF0 hkey $KEY
check "ethtool -x shows the new key" sh -c "$E -x $IF0 | grep -q '$KEY'"
check "ethtool -G rx 127 tx 255" $E -G $IF0 rx 127 tx 255
$E -g $IF0 | cur >/tmp/g
check "ethtool -g shows rx 127 tx 255" sh -c "grep -Eq '^RX:[[:space:]]+127$' /tmp/g && grep -Eq '^TX:[[:space:]]+255$' /tmp/g"
check "ping still works after reconfiguration" $A ping -c 2 -W 2 192.0.2.2
$E -l $IF0 >/tmp/l.before
$E -g $IF0 >/tmp/g.before
$E -x $IF0 >/tmp/x.before
refuse "ethtool -L combined 99 is rejected" $E -L $IF0 combined 99
refuse "ethtool -G rx 100 (not a ring size) is rejected" $E -G $IF0 rx 100
refuse "ethtool -G tx 20000 (too large) is rejected" $E -G $IF0 tx 20000
refuse "ethtool -X equal 9 (more queues than in use) is rejected" $E -X $IF0 equal 9
refuse "ethtool -X hkey of 4 bytes is rejected" $E -X $IF0 hkey 01:02:03:04
$E -l $IF0 >/tmp/l.after
$E -g $IF0 >/tmp/g.after
$E -x $IF0 >/tmp/x.after
same "rejected -L left the channels unchanged" /tmp/l.before /tmp/l.after
same "rejected -G left the rings unchanged" /tmp/g.before /tmp/g.after
same "rejected -X left table and key unchanged" /tmp/x.before /tmp/x.after
check "ethtool -n rx-flow-hash tcp4 reports IP and port fields" sh -c "$E -n $IF0 rx-flow-hash tcp4 | grep -q 'L4 bytes 0 & 1'"
# The shell's hash input is fixed: asking for exactly it is accepted, anything else refused.
check "ethtool -N rx-flow-hash tcp4 tsdfn (what the shell hashes) is accepted" $E -N $IF0 rx-flow-hash tcp4 tsdfn
# (ethtool prints the refusal but exits 0, so the message is what is checked)
check "ethtool -N rx-flow-hash tcp4 sd (other fields) is rejected" sh -c "$E -N $IF0 rx-flow-hash tcp4 sd 2>&1 | grep -q 'Operation not supported'"
# MTU bounds come from the core: the shell's 1514-byte frames, ETH_MIN_MTU.
refuse "MTU 1501 is rejected" $A $IP link set dev $IF0 mtu 1501
refuse "MTU 67 is rejected" $A $IP link set dev $IF0 mtu 67
check "MTU 1400" $A $IP link set dev $IF0 mtu 1400
check "MTU back to 1500" $A $IP link set dev $IF0 mtu 1500
# A refused -L never takes the interface down: a table naming queues 2 and 3 keeps 4 pairs.
check "ethtool -X equal 4" $E -X $IF0 equal 4
U0=$(dmesg | grep -c "$IF0: link up")
refuse "ethtool -L combined 2 under a table naming queue 3 is rejected" $E -L $IF0 combined 2
sleep 2
check "and the interface was not restarted (no new carrier)" test "$(dmesg | grep -c "$IF0: link up")" = "$U0"
check "ethtool -X default" $E -X $IF0 default
check "ethtool -L combined 2 back" $E -L $IF0 combined 2

# ---- native XDP (ndo_bpf): drop, swap without a reset, XDP_TX, detach
check "attach xdp_drop.o natively (xdpdrv)" $IP -n a link set dev $IF0 xdpdrv obj /xdp/xdp_drop.o sec xdp
refuse "ping fails while XDP drops the replies" $A ping -c 3 -W 1 192.0.2.2
D=$(stat rx_xdp_drop $IF0 $A)
check "rx_xdp_drop counts the dropped replies ($D)" test "${D:-0}" -ge 3
check "swap in xdp_pass.o while attached (no detach, no reset)" $IP -n a -force link set dev $IF0 xdpdrv obj /xdp/xdp_pass.o sec xdp
check "ping works through xdp_pass" $A ping -c 2 -W 2 192.0.2.2
P=$(stat rx_xdp_pass $IF0 $A)
check "rx_xdp_pass counts the passed frames ($P)" test "${P:-0}" -ge 2
check "swap in xdp_tx.o (the ICMP echo responder)" $IP -n a -force link set dev $IF0 xdpdrv obj /xdp/xdp_tx.o sec xdp
T0=$(stat rx_xdp_tx $IF0 $A)
check "ping b -> a is answered by XDP_TX" $B ping -c 4 -W 2 192.0.2.1
T1=$(stat rx_xdp_tx $IF0 $A)
check "rx_xdp_tx counts the reflected requests ($T0 -> $T1)" test $((T1 - T0)) -ge 4
E=$(stat rx_xdp_tx_errors $IF0 $A)
check "no XDP_TX errors ($E)" test "${E:-1}" = 0
check "detach XDP" $IP -n a link set dev $IF0 xdpdrv off
check "ping works again after detach" $A ping -c 2 -W 2 192.0.2.2

# ---- the RX hash through the XDP RX-metadata kfunc (6.3+, xdp_metadata_ops.xmo_rx_hash): a
# device-bound program (loaded by onic_xdp_hash with libbpf; iproute2 cannot) reads the hash of
# UDP frames (traceroute's probes from b): the shell's hash, type XDP_RSS_TYPE_L4_IPV4_UDP (0x29).
# With `-K rxhash off` the port hashes nothing: the kfunc reports no hash (every call an error).
# hash_run: the program on $IF0 for 8 s while b sends its probes; its line in /tmp/hash.
hash_run() {
	# No file from an earlier run: its "attached" would send the probes before this one is.
	rm -f /tmp/hash
	$A onic_xdp_hash $IF0 /xdp/xdp_hash.o 8 >/tmp/hash 2>&1 &
	HP=$!
	# The probes go out once the program is attached (it says so), not after a guessed delay:
	# on a loaded host loading and attaching it took more than a second. Deadline 30 s.
	n=0
	while [ $n -lt 30 ] && ! grep -qs '^attached$' /tmp/hash && kill -0 $HP 2>/dev/null; do
		sleep 1
		n=$((n + 1))
	done
	$B traceroute -n -m 1 -q 3 -w 1 192.0.2.1 >/dev/null 2>&1
	wait $HP
	sed 's/^/    | /' /tmp/hash
}
check "-k: receive-hashing on from the start" sh -c "$A ethtool -k $IF0 | grep -Eq '^receive-hashing: on$'"
case $(uname -r) in
6.1.* | 6.2.*)
	echo "SKIP: RX-metadata hash (Linux $(uname -r) has no XDP RX-metadata kfuncs)"
	check "-K rxhash off" $A ethtool -K $IF0 rxhash off
	check "ping with rxhash off" $A ping -c 2 -W 2 192.0.2.2
	;;
*)
	hash_run
	check "a device-bound program reads the RX hash and its type through the kfunc" grep -Eq '^calls=[1-9][0-9]* errors=0 hash=0x[0-9a-f]{8} type=0x29$' /tmp/hash
	check "the hash program detached itself" sh -c "! $IP -n a link show $IF0 | grep -q 'xdp '"
	check "-K rxhash off" $A ethtool -K $IF0 rxhash off
	hash_run
	check "with rxhash off the kfunc reports no hash" grep -Eq '^calls=0 errors=[1-9][0-9]* ' /tmp/hash
	;;
esac
check "-k: receive-hashing off" sh -c "$A ethtool -k $IF0 | grep -Eq '^receive-hashing: off$'"
check "-K rxhash on" $A ethtool -K $IF0 rxhash on
check "-k: receive-hashing on again" sh -c "$A ethtool -k $IF0 | grep -Eq '^receive-hashing: on$'"
check "generic XDP still works too (xdpgeneric drop)" $IP -n a link set dev $IF0 xdpgeneric obj /xdp/xdp_drop.o sec xdp
refuse "ping fails under generic XDP drop" $A ping -c 2 -W 1 192.0.2.2
check "detach generic XDP" $IP -n a link set dev $IF0 xdpgeneric off

# ==== Load: real traffic at full rate, reconfiguration under traffic, link changes, unload. Every
# step has a deadline (timeout), and the counters are checked against what the tools saw.

# cnt NS DEV STAT: a netdev counter (rtnl_link_stats64) as the stack reports it.
cnt() { $IP netns exec "$1" cat "/sys/class/net/$2/statistics/$3"; }
# drops: the driver's own drop and error counters of both ports, summed (they must not move under
# TCP load; the adapter's drops for lack of descriptors are rx_missed_errors, reported apart).
drops() { port_sum rx_dropped rx_errors tx_dropped tx_errors; }
# port_sum STAT...: the statistics STAT... of both ports, summed.
port_sum() {
	n=0
	for st in "$@"; do
		n=$((n + $(cnt a $IF0 $st) + $(cnt b $IF1 $st)))
	done
	echo $n
}
# csum_errors: TCP and UDP checksum errors the stack found in both namespaces (the netdevs offer
# no checksum offload, so every received segment is verified in software: a corrupted byte
# anywhere in the datapath shows up here).
csum_errors() {
	for ns in a b; do
		$IP netns exec $ns cat /proc/net/snmp
	done | awk '/^(Tcp|Udp): [0-9]/ { for (i = 2; i <= NF; i++) if (h[$1, i] == "InCsumErrors") s += $i }
		/^(Tcp|Udp): [A-Z]/ { for (i = 2; i <= NF; i++) h[$1, i] = $i }
		END { print s + 0 }'
}
# json_bytes FILE: bytes the receiver got, from iperf3's JSON.
json_bytes() { awk '/"sum_received"/ { f = 1 } f && /"bytes"/ { gsub(/[^0-9]/, ""); print; exit }' "$1"; }
# iperf DESC DEADLINE ARGS...: one iperf3 run a -> b (a one-off server in b); RECV = bytes the
# receiver got. The run must finish before DEADLINE seconds.
iperf() {
	desc=$1
	dl=$2
	shift 2
	$B iperf3 -s -1 -p 5201 >/tmp/ip3s.log 2>&1 &
	srv=$!
	listening "$B" 5201
	RECV=0
	if timeout "$dl" $A iperf3 -c 192.0.2.2 -p 5201 --connect-timeout 5000 -J "$@" >/tmp/ip3.json 2>&1; then
		RECV=$(json_bytes /tmp/ip3.json)
		pass "$desc: finished, receiver got ${RECV:-0} bytes"
	else
		fail "$desc (no result within $dl s)"
		tail -5 /tmp/ip3.json | sed 's/^/    | /'
	fi
	kill $srv 2>/dev/null
	wait $srv 2>/dev/null
}

echo "== load tests ($MODE card${SIMARGS:+, $SIMARGS})"
# qsnap NS DEV: "QUEUE RX_PACKETS INTERRUPTS" for each queue index of DEV (interrupts of its
# MSI-X vector DEV-qN; 0 in simulation, which has none).
qsnap() {
	for q in 0 1 2 3 4 5 6 7; do
		echo "$q $($IP netns exec $1 ethtool -S $2 | sed -n "s/^ *rx${q}_packets: //p") $(irqs "$2-q$q")"
	done
}
if [ $MODE = pci ]; then
	qsnap b $IF1 >/tmp/q.before
	IRQ0=$(($(irqs $IF0-) + $(irqs $IF1-)))
	MSI0=$(ctl_rd $CTL_INTERRUPTS)
fi
RX0=$(cnt b $IF1 rx_bytes)
D0=$(drops)
iperf "iperf3 TCP, 1 stream, 15 s" 45 -t 15
check "the receiver's rx_bytes cover what iperf3 received" test $(($(cnt b $IF1 rx_bytes) - RX0)) -ge "${RECV:-1}"
RX0=$(cnt b $IF1 rx_bytes)
iperf "iperf3 TCP, 4 streams, 15 s" 45 -t 15 -P 4
check "the receiver's rx_bytes cover what iperf3 received (4 streams)" test $(($(cnt b $IF1 rx_bytes) - RX0)) -ge "${RECV:-1}"
check "no driver drops or errors under TCP load ($(($(drops) - D0)))" test "$(drops)" = "$D0"
if [ $MODE = pci ]; then
	# Each RX queue that received frames was driven by its own MSI-X vector (no queue was served
	# only by another's poll or by a timer), and the guest saw no interrupt the card did not send.
	qsnap b $IF1 >/tmp/q.after
	paste /tmp/q.before /tmp/q.after | awk '{ printf "    | queue %s: rx_packets +%d, interrupts +%d\n", $1, $5 - $2, $6 - $3 }'
	check "every RX queue that received frames took interrupts on its own vector" sh -c \
		"paste /tmp/q.before /tmp/q.after | awk '\$5 > \$2 && \$6 <= \$3 { bad = 1 } \$5 > \$2 { used++ } END { exit bad || !used }'"
	IRQ1=$(($(irqs $IF0-) + $(irqs $IF1-)))
	MSI1=$(ctl_rd $CTL_INTERRUPTS)
	check "the guest took $((IRQ1 - IRQ0)) interrupts on the card's vectors, the card sent $((MSI1 - MSI0)) MSI-X messages" \
		test $((IRQ1 - IRQ0)) -gt 0 -a $((IRQ1 - IRQ0)) -le $((MSI1 - MSI0))
fi
iperf "iperf3 UDP, 64-byte frames, unlimited rate, 10 s" 40 -u -b 0 -l 22 -t 10
U64=$((${RECV:-0} / 22))
iperf "iperf3 UDP, 458-byte payload, unlimited rate, 5 s" 35 -u -b 0 -l 458 -t 5
U458=$((${RECV:-0} / 458))
iperf "iperf3 UDP, 1472-byte payload, unlimited rate, 5 s" 35 -u -b 0 -l 1472 -t 5
U1472=$((${RECV:-0} / 1472))
# The rates are figures, not checks: under TCG they follow the host's load, which can change
# between two runs of 5 s.
echo "    | FIGURE: UDP datagrams received: 22 B: $U64 in 10 s; 458 B: $U458 in 5 s; 1472 B: $U1472 in 5 s"
# TX completions are reclaimed by transmit and a timer, not only when RX traffic happens to
# arrive (without the timer, full-size datagrams stalled with the ring full): once the stream
# has ended, every TX queue of the sender has nothing in flight (BQL) within the deadline.
inflight() {
	$A sh -c "cat /sys/class/net/$IF0/queues/tx-*/byte_queue_limits/inflight" | awk '{ t += $1 } END { print t + 0 }'
}
n=0
while [ $n -lt $((50 * SLOW)) ] && [ "$(inflight)" != 0 ]; do sleep 0.1; n=$((n + 1)); done
check "after the 1472 B stream, no TX queue of $IF0 has bytes in flight within $((5 * SLOW)) s ($(inflight) bytes)" test "$(inflight)" = 0
# On a loss, every counter of both ports (ethtool -S and the netdev's) and of both stacks
# (/proc/net/snmp) that moved during the flood follows the ping's output.
port_counters() {
	{
		$A ethtool -S $IF0 | sed 's/^ */a /'
		$B ethtool -S $IF1 | sed 's/^ */b /'
		for f in /sys/class/net/$IF0/statistics/*; do echo "a $(basename $f): $($A cat $f)"; done
		for f in /sys/class/net/$IF1/statistics/*; do echo "b $(basename $f): $($B cat $f)"; done
		$A cat /proc/net/snmp | awk '/^[A-Za-z]+: [A-Z]/ { split($0, h) } /^[A-Za-z]+: [0-9-]/ { for (i = 2; i <= NF; i++) print "a " h[1] h[i] ": " $i }'
		$B cat /proc/net/snmp | awk '/^[A-Za-z]+: [A-Z]/ { split($0, h) } /^[A-Za-z]+: [0-9-]/ { for (i = 2; i <= NF; i++) print "b " h[1] h[i] ": " $i }'
	} 2>/dev/null
}
# moved BEFORE AFTER: the counters that differ between two port_counters snapshots.
moved() {
	awk 'NR == FNR { v[$1 " " $2] = $3; next } ($1 " " $2) in v && v[$1 " " $2] != $3 { print "moved: " $1 " " $2 " " $3 - v[$1 " " $2] }' "$1" "$2"
}
port_counters >/tmp/flood.before
# ping -f stops at its 2000th reply, and whenever a reply is late it sends the next request
# without waiting: it may end with a request more than it counted ("2001 transmitted, 2000
# received", the last reply still on its way, or "2001 received"), which is not a loss. A loss is an echo request of
# a's stack without its reply reaching a's stack: a's ICMP counters must agree once the last
# reply has arrived. ping's -w deadline is far beyond the flood's usual 10-30 s (a request in
# flight at the deadline would count as lost); the time it took is printed.
icmp() {
	$A cat /proc/net/snmp | awk -v f="$1" '/^Icmp: [A-Z]/ { for (i = 2; i <= NF; i++) h[i] = $i } /^Icmp: [0-9]/ { for (i = 2; i <= NF; i++) if (h[i] == f) print $i }'
}
E0=$(icmp OutEchos)
R0=$(icmp InEchoReps)
check "ping flood, 2000 x 1000 bytes: ping got at least its 2000 replies" sh -c "timeout 180 $A $PING -f -c 2000 -s 1000 -w 150 192.0.2.2 >/tmp/out 2>&1 && awk '/packets transmitted/ { got = \$4 } END { exit !(got >= 2000) }' /tmp/out"
sed -n 's/^\(.*packets transmitted.*\)$/    | FIGURE: ping flood: \1/p' /tmp/out
n=0
while [ $n -lt $((50 * SLOW)) ] && [ $(($(icmp OutEchos) - E0)) != $(($(icmp InEchoReps) - R0)) ]; do sleep 0.1; n=$((n + 1)); done
SENT=$(($(icmp OutEchos) - E0))
GOT=$(($(icmp InEchoReps) - R0))
check "ping flood: every echo request of a's stack got its reply back ($SENT sent, $GOT replies, a's ICMP counters)" test "$SENT" -ge 2000 -a "$SENT" = "$GOT"
if [ "$SENT" != "$GOT" ]; then
	port_counters >/tmp/flood.after
	moved /tmp/flood.before /tmp/flood.after | sed 's/^/    | /'
fi
# Byte-exact through every path: files over TCP both ways (busybox nc; the receiver's stdin is
# held open, or nc would close the connection at its stdin's end), compared; payload patterns
# checked by ping.
dd if=/dev/urandom of=/tmp/blob bs=64k count=128 2>/dev/null
for dir in "a b 192.0.2.2" "b a 192.0.2.1"; do
	set -- $dir
	rm -f /tmp/blob.in
	$IP netns exec $2 sh -c 'sleep 60 | nc -l -p 5202 >/tmp/blob.in' &
	srv=$!
	listening "$IP netns exec $2" 5202
	timeout 60 $IP netns exec $1 nc -w 5 $3 5202 </tmp/blob
	n=0
	while [ $n -lt 30 ] && [ "$(wc -c </tmp/blob.in)" -lt 8388608 ]; do sleep 1; n=$((n + 1)); done
	kill $srv 2>/dev/null
	same "8 MiB over TCP from $1 to $2 arrive byte for byte" /tmp/blob /tmp/blob.in
done
check "ping with a payload pattern (checked by ping) of 1400 bytes" timeout 20 $A $PING -c 20 -i 0.05 -s 1400 -p a55a0ff0 192.0.2.2
check "no TCP/UDP checksum errors anywhere ($(csum_errors))" test "$(csum_errors)" = 0
if [ $MODE != sim ]; then
	for f in /sys/kernel/debug/swiotlb/*; do echo "    | swiotlb $(basename $f): $(cat $f)"; done
fi

# ---- interrupt moderation (ethtool -c/-C): rx-usecs and rx-frames onto the QDMA's completion
# timer and count tables, changed on both ports while a ping stream runs (each queue takes the
# new entries at its next poll's doorbell), nothing lost; values between entries round down,
# values beyond the tables and TX moderation (no TX interrupts) are refused with nothing changed.
coal() { $A ethtool -c $IF0 | sed -n "s/^$1:[[:space:]]*//p"; }
check "ethtool -c: the reference's moderation, 1 us and 64 completions" test "$(coal rx-usecs) $(coal rx-frames)" = "1 64"
timeout $((40 * SLOW)) $B $PING -c 400 -i 0.01 -q 192.0.2.1 >/tmp/coal 2>&1 &
CP=$!
for v in "10 128" "20 192" "0 2" "5 96" "1 64"; do
	set -- $v
	check "ethtool -C rx-usecs $1 rx-frames $2 on both ports while pings run" sh -c \
		"timeout 30 $A ethtool -C $IF0 rx-usecs $1 rx-frames $2 && timeout 30 $B ethtool -C $IF1 rx-usecs $1 rx-frames $2"
	check "ethtool -c shows rx-usecs $1 rx-frames $2 ($(coal rx-usecs), $(coal rx-frames))" test "$(coal rx-usecs) $(coal rx-frames)" = "$1 $2"
	sleep 0.5
done
wait $CP
sed 's/^/    | /' /tmp/coal
check "no ping lost while the moderation changed" grep -q ' 0% packet loss' /tmp/coal
check "ethtool -C rx-usecs 7 rx-frames 100 rounds down to the tables' 5 us and 96" sh -c \
	"$A ethtool -C $IF0 rx-usecs 7 rx-frames 100 && [ \"\$($A ethtool -c $IF0 | sed -n 's/^rx-usecs:[[:space:]]*//p') \$($A ethtool -c $IF0 | sed -n 's/^rx-frames:[[:space:]]*//p')\" = '5 96' ]"
refuse "ethtool -C rx-usecs 21 (longer than the longest timer) is rejected" $A ethtool -C $IF0 rx-usecs 21
refuse "ethtool -C rx-frames 1 (below the smallest count) is rejected" $A ethtool -C $IF0 rx-frames 1
refuse "ethtool -C tx-usecs 10 (no TX interrupts to moderate) is rejected" $A ethtool -C $IF0 tx-usecs 10
check "and the moderation is unchanged ($(coal rx-usecs) us, $(coal rx-frames))" test "$(coal rx-usecs) $(coal rx-frames)" = "5 96"
check "ethtool -C back to the reference" $A ethtool -C $IF0 rx-usecs 1 rx-frames 64
# On the PCI card the queue vectors are real interrupts: the interrupts per received frame of a
# UDP stream at two settings are printed as a figure, not checked. Under TCG they follow the
# host's timing (a CI run measured 862 at 1 us / 64 and 999 at 20 us / 192, the other order
# from an earlier run's 999 and 782), so no order between them can be asserted; that the
# moderation lowers interrupts is checked on the model, where time is the model's (the module's
# port over the model in os-linux/tests/sim_ports.rs: interrupt_moderation_changes_while_traffic_runs),
# and measured on the card in guest time by `cargo xtask vm-bench --icount --tables moderation`
# (docs/benchmarks.md: 1000 interrupts per 1000 frames at 1 us, 150-190 at 20 us).
if [ $MODE = pci ]; then
	# per_kframe USECS FRAMES: the frames $IF1 received during a 3 s UDP stream into it, and
	# the interrupts on its queue vectors per 1000 of them.
	per_kframe() {
		$B ethtool -C $IF1 rx-usecs $1 rx-frames $2
		$B iperf3 -s -1 -p 5202 >/dev/null 2>&1 &
		listening "$B" 5202
		i0=$(irqs "$IF1-q")
		p0=$(cnt b $IF1 rx_packets)
		s0=$(cnt a $IF0 tx_packets)
		m0=$(cnt b $IF1 rx_missed_errors)
		timeout $((30 * SLOW)) $A iperf3 -c 192.0.2.2 -p 5202 -u -b 4M -l 200 -t 3 --connect-timeout 5000 >/dev/null 2>&1
		sent=$(($(cnt a $IF0 tx_packets) - s0))
		# The last frames may still be on their way into $IF1's ring: up to 5 s for them.
		n=0
		while [ $(($(cnt b $IF1 rx_packets) - p0)) -lt $sent ] && [ $n -lt 50 ]; do sleep 0.1; n=$((n + 1)); done
		got=$(($(cnt b $IF1 rx_packets) - p0))
		# A frame the card dropped for want of a descriptor is counted, not lost: it counts as
		# arrived here (the card's behaviour under a full ring).
		missed=$(($(cnt b $IF1 rx_missed_errors) - m0))
		echo "$((got + missed)) $(((($(irqs "$IF1-q") - i0) * 1000) / (got + 1))) $sent"
	}
	set -- $(per_kframe 1 64) $(per_kframe 20 192)
	LOWF=$1 LOWI=$2 LOWS=$3 HIGHF=$4 HIGHI=$5 HIGHS=$6
	$B ethtool -C $IF1 rx-usecs 1 rx-frames 64
	echo "FIGURE: PCI card: interrupts per 1000 frames of a 2500 frames/s UDP stream: $LOWI at 1 us / 64, $HIGHI at 20 us / 192"
	# How many frames a 3 s stream makes depends on the host's speed (a loaded host made 528);
	# what must hold is that every frame the sender's port sent arrived (or was counted as
	# missed by the card), under both settings.
	check "PCI card: the stream arrived under both settings ($LOWF of $LOWS and $HIGHF of $HIGHS frames)" \
		test "$LOWS" -gt 0 -a "$HIGHS" -gt 0 -a "$LOWF" -ge "$LOWS" -a "$HIGHF" -ge "$HIGHS"
fi

# ---- adaptive RX moderation (ethtool -C adaptive-rx, the kernel's DIM library: onic_dim.c).
# With adaptive-rx on, each RX queue's polls feed DIM, whose decisions move the queue along five
# levels of table entries (onic_core::moderation: timer/count indices 0/4 9/6 10/0 12/11 15/15);
# each queue takes its level at its next poll's doorbell, which the card's completion context
# shows (devlink health diagnose rx: cmpt_timer_idx, cmpt_counter_idx). adaptive-rx off puts
# the fixed setting back on every queue at its next poll. The interrupts per frame are a figure
# on the PCI card (the model inside the kernel raises no Linux interrupt): under TCG a flood
# brings frames hundreds of us apart, beyond the tables' longest timer (20 us), so no setting
# can join two frames in one interrupt and no order between two settings can be asserted; the
# model's host test checks the order where time is the model's (os-linux/tests/sim_ports.rs:
# adaptive_moderation_moves_a_running_queue).
echo "== adaptive RX moderation (DIM)"
# dim_rxq FILE: "QUEUE RX_PACKETS" of each of $IF1's queues into FILE.
dim_rxq() { $B ethtool -S $IF1 | sed -n 's/^ *rx\([0-9]*\)_packets: \([0-9]*\)$/\1 \2/p' >"$1"; }
# dim_pairs: "QUEUE TIMER_IDX/COUNTER_IDX" of $IF1's queues as the card's completion contexts
# hold them (its function's rx reporter), into /tmp/dimp.
dim_pairs() {
	devlink health diagnose $DL1 reporter rx 2>/dev/null | awk '{ for (i = 1; i < NF; i++) {
		if ($i == "queue:") q = $(i + 1); if ($i == "cmpt_timer_idx:") t = $(i + 1)
		if ($i == "cmpt_counter_idx:") print q, t "/" $(i + 1) } }' >/tmp/dimp
}
# dim_moved_ok PAIRS: every queue that received frames between /tmp/dim0 and /tmp/dim1 shows one
# of PAIRS in /tmp/dimp, and some queue did.
dim_moved_ok() {
	awk -v ok=" $1 " 'FILENAME == "/tmp/dim0" { a[$1] = $2; next } FILENAME == "/tmp/dim1" { if ($2 > a[$1]) m[$1] = 1; next }
		($1 in m) { n++; if (index(ok, " " $2 " ") == 0) bad = 1 } END { exit bad || !n }' /tmp/dim0 /tmp/dim1 /tmp/dimp
}
# dim_flood N: N flood pings a -> b; prints the interrupts on $IF1's vectors per 1000 frames it
# received (0 without vectors). /tmp/dim0 and /tmp/dim1: its queues before and after.
dim_flood() {
	dim_rxq /tmp/dim0
	i0=$(irqs "$IF1-q")
	f0=$(cnt b $IF1 rx_packets)
	timeout $((60 * SLOW)) $A $PING -q -f -c $1 -W 2 192.0.2.2 >/dev/null 2>&1
	dim_rxq /tmp/dim1
	echo $(((($(irqs "$IF1-q") - i0) * 1000) / ($(cnt b $IF1 rx_packets) - f0 + 1)))
}
LADDER="0/4 9/6 10/0 12/11 15/15"
check "ethtool -C $IF1 rx-usecs 0 rx-frames 2 (the smallest fixed setting)" $B ethtool -C $IF1 rx-usecs 0 rx-frames 2
FIXI=$(dim_flood 1000)
check "ethtool -C $IF1 adaptive-rx on" $B ethtool -C $IF1 adaptive-rx on
check "ethtool -c: Adaptive RX on, rx-usecs 0 and rx-frames 2 kept as the fixed setting" sh -c \
	"$B ethtool -c $IF1 >/tmp/dimc; cat /tmp/dimc; grep -Eq '^Adaptive RX:[[:space:]]+on' /tmp/dimc && grep -Eq '^rx-usecs:[[:space:]]+0$' /tmp/dimc && grep -Eq '^rx-frames:[[:space:]]+2$' /tmp/dimc"
# The levels the flooded queues run, sampled every 0.3 s while the flood goes on (DIM's first
# decision steps every queue down from its start level, 9/6, then it hunts and parks).
( while [ ! -e /tmp/dimdone ]; do dim_pairs; cat /tmp/dimp; sleep 0.3; done >/tmp/dimseen ) &
DIMS=$!
ADAI=$(dim_flood 3000)
touch /tmp/dimdone
wait $DIMS
rm -f /tmp/dimdone
echo "    | timer/count indices seen during the flood: $(awk '{ print $2 }' /tmp/dimseen | sort | uniq -c | awk '{ printf "%s x%s ", $2, $1 }')"
dim_pairs
paste /tmp/dim0 /tmp/dim1 | awk '{ printf "    | queue %s: rx_packets +%d\n", $1, $4 - $2 }'
sed 's/^/    | timer\/count indices of queue /' /tmp/dimp
check "under the flood every queue that received runs a DIM level's table entries ($LADDER), not the fixed 1/1" dim_moved_ok "$LADDER"
echo "FIGURE: interrupts on $IF1's vectors per 1000 frames of a ping flood: $FIXI at the smallest fixed setting (0 us / 2), $ADAI with adaptive-rx (0: no vectors, the model inside the kernel)"
check "ethtool -C $IF1 adaptive-rx off" $B ethtool -C $IF1 adaptive-rx off
check "ethtool -c: Adaptive RX off, the fixed 0 us / 2 back" sh -c \
	"$B ethtool -c $IF1 >/tmp/dimc; grep -Eq '^Adaptive RX:[[:space:]]+off' /tmp/dimc && grep -Eq '^rx-usecs:[[:space:]]+0$' /tmp/dimc && grep -Eq '^rx-frames:[[:space:]]+2$' /tmp/dimc"
dim_flood 200 >/dev/null
dim_pairs
sed 's/^/    | timer\/count indices of queue /' /tmp/dimp
check "after adaptive-rx off every queue that received runs the fixed setting's entries again (1/1)" dim_moved_ok "1/1"
check "ethtool -C $IF1 back to the reference" $B ethtool -C $IF1 rx-usecs 1 rx-frames 64

# ---- reconfiguration, XDP and link changes under TCP load (4 streams, 50 s)
$B iperf3 -s -1 -p 5201 >/tmp/ip3s.log 2>&1 &
SRV=$!
listening "$B" 5201
timeout 90 $A iperf3 -c 192.0.2.2 -p 5201 --connect-timeout 5000 -J -t 50 -P 4 >/tmp/ip3.json 2>&1 &
CLI=$!
sleep 3
check "under load: ethtool -L combined 4" timeout 30 $A ethtool -L $IF0 combined 4
check "under load: ethtool -L combined 4 on the receiver" timeout 30 $B ethtool -L $IF1 combined 4
sleep 2
check "under load: ethtool -G rx 255 tx 255" timeout 30 $A ethtool -G $IF0 rx 255 tx 255
sleep 2
check "under load: attach xdp_pass.o natively" timeout 30 $IP -n b link set dev $IF1 xdpdrv obj /xdp/xdp_pass.o sec xdp
sleep 2
check "under load: swap in xdp_tx.o" timeout 30 $IP -n b -force link set dev $IF1 xdpdrv obj /xdp/xdp_tx.o sec xdp
sleep 2
check "under load: detach XDP" timeout 30 $IP -n b link set dev $IF1 xdpdrv off
sleep 2
check "under load: xdp-loader loads xdp_pass.o and xdp_tx.o behind libxdp's dispatcher" sh -c \
	"timeout 30 $NB xdp-loader load -m native $IF1 /xdp/xdp_pass.o && timeout 30 $NB xdp-loader load -m native $IF1 /xdp/xdp_tx.o && $NB xdp-loader status $IF1 | grep -q xdp_dispatcher"
sleep 2
check "under load: xdp-loader unload --all" timeout 30 $NB xdp-loader unload $IF1 --all
sleep 2
set_link 2
sleep 3
check "link down: $IF0 has no carrier" sh -c "$A ethtool $IF0 | grep -q 'Link detected: no' && $IP -n a link show $IF0 | grep -q NO-CARRIER"
set_link 3
sleep 3
check "link up again: $IF0 has carrier" sh -c "$A ethtool $IF0 | grep -q 'Link detected: yes' && ! $IP -n a link show $IF0 | grep -q NO-CARRIER"
check "the link changes were logged" sh -c "dmesg | grep -q '$IF0: link down' && dmesg | grep -q '$IF0: link up'"
check "under load: MTU 1400 on both ports" sh -c "timeout 30 $A $IP link set dev $IF0 mtu 1400 && timeout 30 $B $IP link set dev $IF1 mtu 1400"
sleep 2
check "under load: ethtool -X equal 2 and a new key on the receiver" sh -c "timeout 30 $B ethtool -X $IF1 equal 2 && timeout 30 $B ethtool -X $IF1 hkey $KEY"
sleep 2
check "under load: MTU back to 1500, default RSS table and key" sh -c \
	"timeout 30 $A $IP link set dev $IF0 mtu 1500 && timeout 30 $B $IP link set dev $IF1 mtu 1500 && timeout 30 $B ethtool -X $IF1 default && timeout 30 $B ethtool -X $IF1 hkey 17:14:e3:d6:7e:c8:96:d1:d8:63:b7:5e:13:7d:b6:3c:bd:4b:4e:25:a1:e0:15:64:25:83:e7:66:44:e1:f2:5c:45:e3:4d:f3:82:e9:5c:d4"
sleep 2
check "under load: ethtool -G back to rx 63 tx 63" timeout 30 $A ethtool -G $IF0 rx 63 tx 63
check "under load: ethtool -L combined 2" timeout 30 $A ethtool -L $IF0 combined 2
check "under load: ethtool -L combined 2 on the receiver" timeout 30 $B ethtool -L $IF1 combined 2
if wait $CLI; then
	RECV=$(json_bytes /tmp/ip3.json)
	check "TCP under reconfiguration ran its full time and moved data (${RECV:-0} bytes)" test "${RECV:-0}" -gt 0
else
	fail "TCP under reconfiguration did not finish"
	tail -5 /tmp/ip3.json | sed 's/^/    | /'
fi
kill $SRV 2>/dev/null
wait $SRV 2>/dev/null
check "ping after the reconfiguration" timeout 20 $A $PING -c 3 -W 2 192.0.2.2

# ---- xdp-filter (Debian's xdp-tools) in native mode: a dropped UDP port, TCP still passes
check "xdp-filter load -m native $IF1" timeout $((30 * SLOW)) $NB xdp-filter load -m native $IF1
check "xdp-filter port 5555" timeout 30 $NB xdp-filter port 5555
timeout 20 $A iperf3 -c 192.0.2.2 -u -p 5555 -b 1M -t 2 --connect-timeout 2000 >/dev/null 2>&1
iperf "iperf3 TCP through xdp-filter, 3 s" 30 -t 3
$NB xdp-filter status >/tmp/out 2>&1
H=$(awk '$1 == "5555" { print $NF }' /tmp/out)
check "xdp-filter dropped the frames to port 5555 ($H hits)" test "${H:-0}" -gt 0
check "xdp-filter unload" timeout 30 $NB xdp-filter unload $IF1

# qsum DIR NAME: ethtool -S's queue-health counter DIR<q>_NAME summed over the queues of both
# ports (docs/statistics.md, queue health).
qsum() {
	{ $A ethtool -S $IF0; $B ethtool -S $IF1; } |
		awk -v p="$1" -v n="$2" '{ sub(":", "", $1) } $1 ~ ("^" p "[0-9]+_" n "$") { s += $2 } END { print s + 0 }'
}
# dlh REPORTER FIELD: the devlink health counter FIELD (error, recover) of REPORTER summed over
# both functions, from /tmp/dlhealth (devlink health show); dldump REPORTER: the stored dump of
# the function whose reporter saw errors into /tmp/dldump (DLF: that function's handle).
dlh() {
	awk -v r="$1" -v f="$2" '/reporter / { cur = $2 } cur == r { for (i = 1; i < NF; i++) if ($i == f) s += $(i + 1) } END { print s + 0 }' /tmp/dlhealth
}
dldump() {
	DLF=$DL0
	devlink health show $DL0 reporter $1 | grep -q ' error 0 ' && DLF=$DL1
	devlink health dump show $DLF reporter $1 >/tmp/dldump 2>&1
	head -c 3000 /tmp/dldump | sed 's/^/    | /'
	echo
}
# ---- a hung TX engine: the watchdog reports the queue and the driver restarts the interface
TXR0=$(qsum tx restarts)
echo "onic-vm: fault window begins" >/dev/kmsg
set_tx_stall 1
timeout $((40 * SLOW)) $A $PING -f -w $((25 * SLOW)) -s 1000 192.0.2.2 >/dev/null 2>&1 &
FL=$!
n=0
while [ $n -lt $((30 * SLOW)) ] && ! dmesg | grep -q "TX queue [0-9]* timed out"; do sleep 1; n=$((n + 1)); done
set_tx_stall 0
n=0
while [ $n -lt 20 ] && ! dmesg | grep -Eq "queue [0-9]+ restarted"; do sleep 1; n=$((n + 1)); done
kill $FL 2>/dev/null
wait $FL 2>/dev/null
echo "onic-vm: fault window ends" >/dev/kmsg
check "a stalled TX engine is reported (ndo_tx_timeout)" sh -c 'dmesg | grep -Eq "TX queue [0-9]+ timed out: [0-9]+ in flight"'
check "and the queue restarted in place" sh -c "dmesg | grep -Eq '($IF0|$IF1): queue [0-9]+ restarted'"
check "traffic flows after the restart" timeout 20 $A $PING -c 3 -W 2 192.0.2.2
check "iperf3 TCP after the restart" sh -c "($B iperf3 -s -1 -p 5201 >/dev/null 2>&1 &) && sleep $SLOW && timeout 30 $A iperf3 -c 192.0.2.2 -p 5201 -t 3 >/dev/null"
check "ethtool -S: tx<q>_restarts counts the TX restart (+$(($(qsum tx restarts) - TXR0)))" test $(($(qsum tx restarts) - TXR0)) -ge 1
# devlink: the TX timeout went to the tx reporter, which dumped the queue and recovered it.
devlink health show >/tmp/dlhealth 2>&1
sed 's/^/    | /' /tmp/dlhealth
check "devlink health: the tx reporter counted the error and its recovery, and is healthy (+$(dlh tx error) errors, +$(dlh tx recover) recoveries)" \
	sh -c "[ $(dlh tx error) -ge 1 ] && [ $(dlh tx recover) = $(dlh tx error) ] && ! grep -A1 'reporter tx' /tmp/dlhealth | grep -q 'state error'"
dldump tx
# The dump is taken when the reset work reports, after the stall was lifted (as soon as the
# timeout was seen): by then the engine may have sent what was in flight, so the dump's count
# is whatever the ring holds at that moment (a loaded 6.1 PCI run dumped 0). That frames were
# in flight when the watchdog fired is the timeout line's own count, checked above.
check "devlink health dump show: the failed queue's H2C contexts and ring state" sh -c \
	"grep -q 'queue' /tmp/dldump && grep -q 'sw_pidx' /tmp/dldump && grep -q 'hw_cidx' /tmp/dldump && grep -q 'ring_next_to_use' /tmp/dldump && grep -Eq 'ring_in_flight:? [0-9]+' /tmp/dldump"

# ---- a lying completion ring (its color never flips after a wrap): the RX queue detects it,
# stops asking to be polled, and a work item restarts it
R0=$(dmesg | grep -Ec "queue [0-9]+ restarted")
QE0=$(qsum rx queue_errors)
QR0=$(qsum rx restarts)
QS0=$(qsum rx stall_polls)
flood_frozen
n=0
while [ $n -lt $((75 * SLOW)) ] && ! dmesg | grep -q "RX or XDP_TX ring error"; do sleep 1; n=$((n + 1)); done
set_cmpt_freeze 0
n=0
while [ $n -lt 20 ] && [ "$(dmesg | grep -Ec "queue [0-9]+ restarted")" -le "$R0" ]; do sleep 1; n=$((n + 1)); done
kill $FL 2>/dev/null
wait $FL 2>/dev/null
sleep 2
echo "onic-vm: fault window ends" >/dev/kmsg
check "a completion ring whose color never flips is detected" sh -c 'dmesg | grep -q "RX or XDP_TX ring error; restarting the queue"'
check "and the RX queue restarted in place" test "$(dmesg | grep -Ec "queue [0-9]+ restarted")" -gt "$R0"
check "traffic flows after the RX restart" timeout 20 $A $PING -c 3 -W 2 192.0.2.2
QE0=$(($(qsum rx queue_errors) - QE0))
QR0=$(($(qsum rx restarts) - QR0))
QS0=$(($(qsum rx stall_polls) - QS0))
check "ethtool -S: the frozen ring in rx<q>_queue_errors (+$QE0), rx<q>_restarts (+$QR0), rx<q>_stall_polls (+$QS0)" \
	test $QE0 -ge 1 -a $QR0 -ge 1 -a $QS0 -ge 1
# devlink: the frozen completion ring went to the rx reporter: reported, dumped, recovered; then
# a recovery the user asks for restarts the queues again and is counted.
devlink health show >/tmp/dlhealth 2>&1
sed 's/^/    | /' /tmp/dlhealth
check "devlink health: the rx reporter counted the frozen ring and its recovery (+$(dlh rx error) errors, +$(dlh rx recover) recoveries)" \
	sh -c "[ $(dlh rx error) -ge 1 ] && [ $(dlh rx recover) -ge 1 ]"
dldump rx
check "devlink health dump show: the frozen queue's C2H and completion contexts" sh -c \
	"grep -q 'cmpt_pidx' /tmp/dldump && grep -q 'cmpt_color' /tmp/dldump && grep -Eq 'queue_errors:? [1-9]' /tmp/dldump"
# With auto-recovery off, a failure leaves the reporter in error (counted, not recovered by
# devlink; the driver restarts the queue all the same) until the user recovers it.
check "devlink health set: rx auto_recover false on both functions" sh -c \
	"devlink health set $DL0 reporter rx auto_recover false && devlink health set $DL1 reporter rx auto_recover false"
E0=$(dlh rx error)
RC0=$(dlh rx recover)
RE0=$(dmesg | grep -c "RX or XDP_TX ring error")
R0=$(dmesg | grep -Ec "queue [0-9]+ restarted")
flood_frozen
n=0
while [ $n -lt $((75 * SLOW)) ] && [ "$(dmesg | grep -c "RX or XDP_TX ring error")" -le "$RE0" ]; do sleep 1; n=$((n + 1)); done
set_cmpt_freeze 0
n=0
while [ $n -lt 20 ] && [ "$(dmesg | grep -Ec "queue [0-9]+ restarted")" -le "$R0" ]; do sleep 1; n=$((n + 1)); done
kill $FL 2>/dev/null
wait $FL 2>/dev/null
sleep 2
devlink health show >/tmp/dlhealth 2>&1
sed 's/^/    | /' /tmp/dlhealth
check "without auto-recovery the rx reporter counts errors ($E0 -> $(dlh rx error)) but no recovery ($RC0 -> $(dlh rx recover)) and stays in error" \
	sh -c "[ $(dlh rx error) -gt $E0 ] && [ $(dlh rx recover) = $RC0 ] && grep -A1 'reporter rx' /tmp/dlhealth | grep -q 'state error'"
check "and the driver restarted the queue all the same" test "$(dmesg | grep -Ec "queue [0-9]+ restarted")" -gt "$R0"
check "traffic flows with the reporter in error" timeout 20 $A $PING -c 3 -W 2 192.0.2.2
K=0
for d in $DL0 $DL1; do
	if devlink health show $d reporter rx | grep -q 'state error'; then
		check "devlink health recover $d reporter rx, asked for by the user" devlink health recover $d reporter rx
		K=$((K + 1))
	fi
done
# (the user's recoveries restart queues too: the fault window ends after them)
echo "onic-vm: fault window ends" >/dev/kmsg
devlink health show >/tmp/dlhealth 2>&1
check "the user's recoveries are counted ($RC0 -> $(dlh rx recover), +$K) and the reporters are healthy again" \
	sh -c "[ $(dlh rx recover) = $((RC0 + K)) ] && ! grep -q 'state error' /tmp/dlhealth"
check "traffic flows after the user's recovery" timeout 20 $A $PING -c 3 -W 2 192.0.2.2
check "devlink health set: rx auto_recover true again" sh -c \
	"devlink health set $DL0 reporter rx auto_recover true && devlink health set $DL1 reporter rx auto_recover true"
check "devlink health dump clear" devlink health dump clear $DLF reporter rx

# ---- devlink health diagnose; the netdev netlink family: queue NAPIs, page pools, per-queue statistics (netlink.sh)
. /etc/onic/netlink.sh && { devlink_diagnose_tests; netlink_tests; }

# wedged_engine_tests (PCI card): a queue must restart while the card's context engine stays busy
# (CTXT_BUSY): the restart can invalidate nothing, so the driver cuts the function off from
# memory (bus mastering off) before any page goes back; the interface restart that follows
# cannot program the card and closes the interface. While the engine stays wedged the interface
# refuses to come up; once it answers, every queue context is invalidated, the DMA is on again
# and traffic flows. Every page pool gets its pages back (checked at the end of the run).
wedged_engine_tests() {
	F0=$(dmesg | grep -c "interface restart failed")
	echo "onic-vm: fault window begins" >/dev/kmsg
	ctl_wr $CTL_CTXT_BUSY 1
	flood_frozen
	n=0
	while [ $n -lt $((150 * SLOW)) ] && [ "$(dmesg | grep -c "interface restart failed")" -le "$F0" ]; do sleep 1; n=$((n + 1)); done
	set_cmpt_freeze 0
	kill $FL 2>/dev/null
	wait $FL 2>/dev/null
	sleep 5
	check "a queue restart on a wedged context engine fails and is reported" sh -c 'dmesg | grep -Eq "queue [0-9]+: restart failed"'
	check "the function is cut off from memory before its pages go back" sh -c 'dmesg | grep -q "bus mastering is off until the interface is opened again"'
	check "the interface restart fails and closes the interface" test "$(dmesg | grep -c "interface restart failed")" -gt "$F0"
	# Which port closed: the first whose queue failed (the flood stops with it, so the other
	# port may never see its ring error).
	if $IP -n a link show $IF0 | grep -q '[<,]UP[,>]'; then WNS=b WIF=$IF1; else WNS=a WIF=$IF0; fi
	check "$WIF is down" sh -c "! $IP -n $WNS link show $WIF | grep -q '[<,]UP[,>]'"
	refuse "$WIF does not come up while the engine stays wedged" timeout 60 $IP -n $WNS link set $WIF up
	check "and says why" sh -c 'dmesg | grep -q "still does not complete context commands"'
	ctl_wr $CTL_CTXT_BUSY 0
	echo "onic-vm: fault window ends" >/dev/kmsg
	check "once the engine answers, the interfaces come up again" sh -c "timeout 60 $IP -n a link set $IF0 up && timeout 60 $IP -n b link set $IF1 up"
	check "with every queue context invalidated first" sh -c 'dmesg | grep -q "every queue context invalidated: the card.s DMA is on again"'
	check "traffic flows after the wedged engine" sh -c "sleep 2; timeout 20 $A $PING -c 3 -W 2 192.0.2.2"
	echo "card accesses blocked while the DMA was off: $(ctl_rd $CTL_BLOCKED_DMA)"
}

# ---- the card's other faults (PCI card: the control window only, simulation mode has no knob
# for them): completion entries that lie (the error bit, a length of 0, a length past the
# buffers posted) are dropped one by one with their counter, the ring's buffers go back to the
# card; frames with a bad FCS are dropped by the CMAC and counted there. Traffic goes on.
# rxsum NAME: ethtool -S's rx<q>_NAME (or NAME itself) summed over the queues of both ports.
rxsum() {
	{ $A ethtool -S $IF0; $B ethtool -S $IF1; } |
		awk -v n="$1" '{ sub(":", "", $1) } $1 ~ ("^(rx[0-9]+_)?" n "$") { s += $2 } END { print s + 0 }'
}
# lie KIND COUNT: the next COUNT completion entries lie as KIND (qemu-card/src/ctl.rs), then 40
# pings (one per 50 ms) carry them.
lie() {
	ctl_wr $CTL_CORRUPT_CMPT $(($1 << 16 | $2))
	timeout 20 $A $PING -c 40 -i 0.05 -W 1 192.0.2.2 >/dev/null 2>&1
}
if [ $MODE = pci ]; then
	E0=$(rxsum cmpt_errors)
	L0=$(rxsum bad_length)
	F0=$(rxsum stat_rx_bad_fcs)
	echo "onic-vm: fault window begins" >/dev/kmsg
	lie 1 5
	lie 2 5
	lie 3 5
	ctl_wr $CTL_BAD_FCS 7
	timeout 20 $A $PING -c 40 -i 0.05 -W 1 192.0.2.2 >/dev/null 2>&1
	echo "onic-vm: fault window ends" >/dev/kmsg
	check "5 completions with the error bit dropped and counted (cmpt_errors +$(($(rxsum cmpt_errors) - E0)))" \
		test $(($(rxsum cmpt_errors) - E0)) = 5
	check "10 completions with a length of 0 or past the buffers dropped and counted (bad_length +$(($(rxsum bad_length) - L0)))" \
		test $(($(rxsum bad_length) - L0)) = 10
	check "7 frames with a bad FCS counted by the CMACs (stat_rx_bad_fcs +$(($(rxsum stat_rx_bad_fcs) - F0)))" \
		test $(($(rxsum stat_rx_bad_fcs) - F0)) = 7
	check "traffic flows after the lying completions" timeout 20 $A $PING -c 20 -i 0.05 -W 2 192.0.2.2
	# A frozen completion ring (status records no longer written while entries keep coming):
	# the poll finds entries nobody reported, the queue enters its error state and is restarted.
	R0=$(dmesg | grep -Ec "queue [0-9]+ restarted")
	E0=$(dmesg | grep -c "RX or XDP_TX ring error")
	echo "onic-vm: fault window begins" >/dev/kmsg
	ctl_wr $CTL_CMPT_STATUS_FREEZE 1
	timeout $((40 * SLOW)) $A $PING -f -w $((25 * SLOW)) -s 100 192.0.2.2 >/dev/null 2>&1 &
	FL=$!
	n=0
	while [ $n -lt $((30 * SLOW)) ] && [ "$(dmesg | grep -c "RX or XDP_TX ring error")" -le "$E0" ]; do sleep 1; n=$((n + 1)); done
	ctl_wr $CTL_CMPT_STATUS_FREEZE 0
	n=0
	while [ $n -lt 20 ] && [ "$(dmesg | grep -Ec "queue [0-9]+ restarted")" -le "$R0" ]; do sleep 1; n=$((n + 1)); done
	kill $FL 2>/dev/null
	wait $FL 2>/dev/null
	sleep 2
	echo "onic-vm: fault window ends" >/dev/kmsg
	check "a completion ring whose status record stops moving is detected" test "$(dmesg | grep -c "RX or XDP_TX ring error")" -gt "$E0"
	check "and its queue restarted in place" test "$(dmesg | grep -Ec "queue [0-9]+ restarted")" -gt "$R0"
	check "traffic flows after the frozen completion ring" timeout 20 $A $PING -c 3 -W 2 192.0.2.2
	# An error the QDMA detects (C2H_ERR_STAT bit 3, the card's RAISE_ERROR) reaches the
	# master PF's error vector once (it is not re-armed) and is logged decoded.
	X0=$(irqs "$IF0-err")
	echo "onic-vm: fault window begins" >/dev/kmsg
	ctl_wr $CTL_RAISE_ERROR $((2 << 24 | 0x8))
	sleep 1
	ctl_wr $CTL_RAISE_ERROR $((2 << 24 | 0x10))
	sleep 1
	echo "onic-vm: fault window ends" >/dev/kmsg
	check "a QDMA error is logged decoded" sh -c \
		"dmesg | grep -q \"QDMA error interrupt: GLBL_ERR_STAT 0x00000100 (streaming C2H); C2H_ERR_STAT 0x00000008: bit 3 QID_MISMATCH (a packet's queue id did not match its queue); C2H first error on queue\""
	check "on the master PF's error vector, once ($IF0-err +$(($(irqs "$IF0-err") - X0)))" test $(($(irqs "$IF0-err") - X0)) = 1
	wedged_engine_tests
fi

# ---- rmmod under TCP load, then load/unload cycles with traffic
$B iperf3 -s -1 -p 5201 >/dev/null 2>&1 &
SRV=$!
listening "$B" 5201
$A iperf3 -c 192.0.2.2 -p 5201 -t 30 -P 4 >/dev/null 2>&1 &
CLI=$!
sleep 4
check "rmmod under TCP load (4 streams)" timeout 60 rmmod onic
end_jobs $CLI $SRV
refuse "netdevs are gone after rmmod" $IP -n a link show $IF0
netlink_after_rmmod

# ports_up: both ports in their namespaces with their addresses, up.
ports_up() {
	$IP link set $IF0 netns a && $IP link set $IF1 netns b &&
		$IP -n a addr add 192.0.2.1/24 dev $IF0 && $IP -n b addr add 192.0.2.2/24 dev $IF1 &&
		$IP -n a link set $IF0 up && $IP -n b link set $IF1 up
}
# removal_tests (PCI card): the card falls off the bus under traffic (the control window's GONE:
# every register and configuration read answers all ones, no DMA, no interrupt) and the kernel
# removes its functions; it comes back reset and a rescan probes it again; then the host
# hot-unplugs the card's slot (QMP device_del) under a ping flood.
removal_tests() {
	check "insmod for the removal tests" timeout 60 insmod $KO
	card_netdevs
	check "ports up in their namespaces" ports_up
	check "ping before the card falls off the bus" timeout 20 $A $PING -c 3 -W 2 192.0.2.2
	echo "onic-vm: fault window begins" >/dev/kmsg
	$B iperf3 -s -1 -p 5201 >/dev/null 2>&1 &
	SRV=$!
	listening "$B" 5201
	$A iperf3 -c 192.0.2.2 -p 5201 -t 60 -P 4 >/dev/null 2>&1 &
	CLI=$!
	sleep 3
	ctl_wr $CTL_GONE 1
	sleep 8
	check "the dead card's configuration space reads all ones (vendor ID read live)" \
		test "$(od -An -tx2 -N2 /sys/bus/pci/devices/$PF0/config | tr -d ' ')" = ffff
	t0=$(cut -d. -f1 /proc/uptime)
	check "the kernel removes the dead functions (sysfs remove) within 60 s" \
		timeout 60 sh -c "echo 1 >/sys/bus/pci/devices/$PF1/remove && echo 1 >/sys/bus/pci/devices/$PF0/remove"
	echo "    | removal took $(($(cut -d. -f1 /proc/uptime) - t0)) s"
	end_jobs $CLI $SRV
	check "their netdevs are gone" sh -c "! $IP -n a link show $IF0 2>/dev/null && ! $IP -n b link show $IF1 2>/dev/null"
	check "the driver released the queues of the card that left the bus" sh -c 'dmesg | grep -q "the card has left the bus"'
	ctl_wr $CTL_GONE 0
	echo "onic-vm: fault window ends" >/dev/kmsg
	echo 1 >/sys/bus/pci/rescan
	n=0
	card_netdevs
	while [ $n -lt 30 ] && [ -z "$IF1" ]; do sleep 1; n=$((n + 1)); card_netdevs; done
	check "after a rescan the card is probed again ($IF0, $IF1)" test -n "$IF0" -a -n "$IF1"
	check "ports up again" ports_up
	check "traffic flows on the card probed again" timeout 20 $A $PING -c 3 -W 2 192.0.2.2
	timeout 60 $A $PING -f -w 50 192.0.2.2 >/dev/null 2>&1 &
	FL=$!
	sleep 2
	# The host presses the slot's attention button (QMP device_del; xtask/src/vm.rs): pciehp
	# removes both functions after its 5 s grace time.
	echo "onic-vm: qmp device_del onic0"
	n=0
	while [ $n -lt 60 ] && [ -e /sys/bus/pci/devices/$PF0 -o -e /sys/bus/pci/devices/$PF1 ]; do sleep 1; n=$((n + 1)); done
	check "QMP device_del hot-unplugged the card's slot under a ping flood within 60 s ($n s)" \
		test ! -e /sys/bus/pci/devices/$PF0 -a ! -e /sys/bus/pci/devices/$PF1
	kill $FL 2>/dev/null
	wait $FL 2>/dev/null
	check "the module unloads after the card is gone" timeout 30 rmmod onic
}

ok=0
i=0
while [ $i -lt 20 ]; do
	if timeout 30 insmod $KO $SIMARGS && ports_up &&
		timeout 20 $A $PING -c 200 -f -W 2 192.0.2.2 >/dev/null; then
		timeout 20 $A $PING -f -w 10 192.0.2.2 >/dev/null 2>&1 &
		FL=$!
		sleep 1
		timeout 30 rmmod onic && ok=$((ok + 1))
		kill $FL 2>/dev/null
		wait $FL 2>/dev/null
	else
		rmmod onic 2>/dev/null
	fi
	i=$((i + 1))
done
if [ $ok = 20 ]; then pass "20 load/unload cycles, each with a ping flood and rmmod under it"; else fail "20 load/unload cycles ($ok succeeded)"; fi
# AF_XDP with onic_xsk (os-linux/vm/README.md): loads the module and unloads it again.
. /etc/onic/xsk.sh

# ---- kernel stack depth (os-linux/README.md, "Stack depth"): the module's entry points run on
# the kernel's 16 KiB stack with large frames. The kernel's stack tracer records the deepest
# stack any traced function saw while the control paths run: ports up (pairs built, rings
# filled from new page pools), ethtool -L, a zero-copy bind and unbind (a queue's pair rebuilt
# on the UMEM and back) and ports down. Measured on 2026-12-06: 10.0 to 12.3 KiB (6.1 PCI to 6.12
# sim). The check fails when a change brings it within 2 KiB of the end of the stack (a change
# that grew two frames by 2.9 KiB overflowed the stack in ports up).
STACK_BUDGET=14336
if [ -w /proc/sys/kernel/stack_tracer_enabled ] && timeout 30 insmod $KO $SIMARGS; then
	card_netdevs
	echo 0 >/sys/kernel/tracing/stack_max_size
	echo 1 >/proc/sys/kernel/stack_tracer_enabled
	ports_up
	$A ethtool -L $IF0 combined 4
	$A $XSK probe $IF0 -q 0 >/dev/null 2>&1
	$A $IP link set $IF0 down
	$B $IP link set $IF1 down
	echo 0 >/proc/sys/kernel/stack_tracer_enabled
	S=$(cat /sys/kernel/tracing/stack_max_size)
	echo "    | FIGURE: deepest kernel stack through the module's control paths: $S of 16384 bytes"
	grep -E '^ *[0-9]+\)' /sys/kernel/tracing/stack_trace | grep -B2 -A1 onic | sed 's/^/    | /'
	check "the deepest kernel stack through ports up, ethtool -L, a zero-copy bind and ports down is under $STACK_BUDGET bytes ($S)" test "$S" -lt $STACK_BUDGET
	check "rmmod after the stack depth run" timeout 30 rmmod onic
else
	fail "kernel stack depth: the stack tracer (CONFIG_STACK_TRACER) is there and onic.ko loads"
fi

# ---- rmmod with an XDP program attached, right after a ring error whose queue restart is
# pending or running (the restart work takes RTNL, which the unregister holds)
if timeout 30 insmod $KO $SIMARGS && ports_up &&
	$IP -n a link set dev $IF0 xdpdrv obj /xdp/xdp_pass.o sec xdp && $IP -n b link set dev $IF1 xdpdrv obj /xdp/xdp_pass.o sec xdp; then
	pass "insmod, ports up, xdp_pass.o attached to both ports"
else
	fail "insmod, ports up, xdp_pass.o attached to both ports"
fi
R0=$(dmesg | grep -c "RX or XDP_TX ring error")
flood_frozen
n=0
while [ $n -lt $((750 * SLOW)) ] && [ "$(dmesg | grep -c "RX or XDP_TX ring error")" -le "$R0" ]; do sleep 0.1; n=$((n + 1)); done
check "a ring error is reported under the flood" test "$(dmesg | grep -c "RX or XDP_TX ring error")" -gt "$R0"
check "rmmod at once, XDP attached, the restart pending" timeout 60 rmmod onic
set_cmpt_freeze 0 2>/dev/null
kill $FL 2>/dev/null
wait $FL 2>/dev/null
echo "onic-vm: fault window ends" >/dev/kmsg
refuse "its netdevs are gone" $IP -n a link show $IF0
check "no interrupt vector of the module is left behind" sh -c '! grep -q onic /proc/interrupts'
if [ $MODE = pci ]; then
	removal_tests
fi
$IP netns del a
$IP netns del b
finish
