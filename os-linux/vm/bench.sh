#!/bin/busybox sh
# /init of the VM benchmark (cargo xtask vm-bench): two ports cabled to each other, traffic from
# one namespace to the other, the configurations side by side in one boot. Each figure is one line
#   BENCH <table> <configuration> <what> <value> <unit>
# which the xtask turns into the tables of docs/benchmarks.md.
#
# The device (onic_bench_dev=): `sim`, onic.ko in simulation mode (the model runs in this
# kernel); `pci`, onic.ko on the QEMU card (the model runs in QEMU, outside the guest); `virtio`,
# two virtio-net-pci NICs joined by a QEMU hub, the kernel's own virtio_net driver: the peer.
#
# The sender (onic_bench_sender=): `same`, traffic from the device's other port in this guest;
# `guest`, from a second guest (onic_bench_role=sender, this same script) whose virtio NIC is
# cabled to the device's port 0 by a QEMU socket netdev, so that this guest's instructions are
# only its receiving driver's and stack's. The two guests talk over a second cable of their own
# (a virtio NIC each, 10.9.9.0/24): the receiver asks, the sender runs iperf3 or pktgen and
# answers with their output when done (busybox nc, one command per connection). `card`: from
# the QEMU card's own traffic generator (qemu-card/src/gen.rs), which this guest sets through the
# card's test-control window: UDP frames into port 0 at a fixed interval of QEMU's virtual clock
# (onic_bench_gen_ns=), so under icount they arrive at the same points of this guest's work in
# every run; with the virtio peer the card is there for its generator only (no driver binds
# it), whose frames leave its port 0 for a QEMU hub shared with the virtio NIC. UDP is read by
# onic_udp_sink (every datagram copied to user space); there is no TCP figure (the generator
# does not answer).
#
# Under QEMU's -icount shift=0,sleep=off (onic_bench_icount=1) one guest instruction is one
# nanosecond of guest time, so the guest's busy time is its instruction count: each rate gets a
# second figure, the guest's instructions per packet (per KiB for TCP), measured as the busy
# time (elapsed minus idle, /proc/uptime, 10 ms resolution) over the packets counted.

# `/init serve`: the sender guest's command server runs this script again for each command.
SERVE=$1
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
IP=/usr/sbin/ip
if [ "$SERVE" != serve ]; then
	/bin/busybox --install -s /bin
	mount -t proc proc /proc
	mount -t sysfs sysfs /sys
	mount -t devtmpfs devtmpfs /dev
	mkdir -p /run /var /tmp
	ln -s /run /var/run
	mount -t tmpfs tmpfs /run
	mount -t tmpfs tmpfs /tmp
	mount -t bpf bpf /sys/fs/bpf
fi
KO=/lib/modules/onic.ko
SECS=$(sed -n 's/.*onic_bench_secs=\([0-9]*\).*/\1/p' /proc/cmdline)
SECS=${SECS:-5}
DEV=$(sed -n 's/.*onic_bench_dev=\([a-z]*\).*/\1/p' /proc/cmdline)
DEV=${DEV:-sim}
ICOUNT=$(sed -n 's/.*onic_bench_icount=\([01]\).*/\1/p' /proc/cmdline)
SENDER=$(sed -n 's/.*onic_bench_sender=\([a-z]*\).*/\1/p' /proc/cmdline)
SENDER=${SENDER:-same}
ROLE=$(sed -n 's/.*onic_bench_role=\([a-z]*\).*/\1/p' /proc/cmdline)
ROLE=${ROLE:-receiver}
GEN_NS=$(sed -n 's/.*onic_bench_gen_ns=\([0-9]*\).*/\1/p' /proc/cmdline)
GEN_NS=${GEN_NS:-20000}
# onic_bench_profile=1: QEMU runs the plugin qemu-card/plugin/onic_insn.c, which counts every
# instruction of the window between `onic_prof start` and `onic_prof stop` per code block; the
# guest writes its symbols and the windows' figures to QEMU's debug console (`onic_prof dump`),
# and the host sums the counts per function (xtask/src/insnprof.rs).
PROFILE=$(sed -n 's/.*onic_bench_profile=\([01]\).*/\1/p' /proc/cmdline)
# The tables to measure (onic_bench_tables=, comma-separated): memory, xdp, xdp_drop, xdp_tx, xsk.
TABLES=$(sed -n 's/.*onic_bench_tables=\([a-z_,]*\).*/\1/p' /proc/cmdline)
TABLES=${TABLES:-memory,xdp,xdp_drop,xdp_tx,xsk}
# The two guests' MAC addresses (set by xtask/src/vmbench.rs): the control cable's NICs, the
# sender's data NIC, and the receiver's data NIC when it is a virtio one.
CTL_SENDER=52:54:00:c0:00:01 CTL_RECEIVER=52:54:00:c0:00:02
DATA_SENDER=52:54:00:5e:00:01 DATA_RECEIVER=52:54:00:5e:00:02
# Frame sizes on the wire (with the 4-byte FCS); UDP payload = size - 46.
# The frame sizes of the UDP and XDP sweeps (onic_bench_sizes=, comma-separated).
SIZES=$(sed -n 's/.*onic_bench_sizes=\([0-9,]*\).*/\1/p' /proc/cmdline | tr , ' ')
SIZES=${SIZES:-1518 1000 500 250 64}

[ "$SERVE" = serve ] || echo "== onic VM benchmark on Linux $(uname -r), $ROLE, device $DEV, sender $SENDER, $SECS s per figure, icount ${ICOUNT:-0}, $(grep -c ^processor /proc/cpuinfo) CPU, tables $TABLES, IOMMU $(ls /sys/class/iommu 2>/dev/null | tr '\n' ' ')"

# want TABLE: whether this boot measures TABLE.
want() {
	case ",$TABLES," in *",$1,"*) return 0 ;; esac
	return 1
}

# by_mac MAC: the interface with that address.
by_mac() {
	for n in /sys/class/net/*; do
		[ "$(cat $n/address)" = "$1" ] && basename $n
	done
}
# virtio_up: the virtio driver (the peer's, and both guests' control NICs').
virtio_up() {
	[ -d /sys/module/virtio_net ] || for m in virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci failover net_failover virtio_net; do
		insmod /lib/modules/$m.ko 2>/dev/null
	done
	sleep 1
}
# pktgen_start IFACE SIZE MAC [PORT]: the kernel's pktgen starts sending SIZE-byte UDP frames
# (FCS included) to port PORT (9 unless given) from IFACE to MAC at full speed, until
# traffic_stop.
pktgen_start() {
	PG=/proc/net/pktgen
	# The device stays with pktgen's thread from one size to the next (removing it is done
	# asynchronously, and adding it again right after can fail).
	[ -e $PG/$1 ] || echo "add_device $1" >$PG/kpktgend_0
	for c in "count 0" "pkt_size $(($2 - 4))" "delay 0" "dst_mac $3" "dst 192.0.2.2" "udp_dst_min ${4:-9}" "udp_dst_max ${4:-9}"; do
		echo "$c" >$PG/$1
	done
	# Its own output away from this shell's: a command server's answer ends with its stdout.
	echo start >$PG/pgctrl 2>/dev/null </dev/null &
}
# iperf3_start ARGS...: iperf3's client with ARGS starts towards the receiver, until
# traffic_stop (its report is not used: the receiver counts).
iperf3_start() {
	iperf3 -c 192.0.2.2 -p 5201 "$@" >/tmp/iperf3.out 2>&1 &
}
# traffic_stop: whatever pktgen_start or iperf3_start started stops.
traffic_stop() {
	[ -e /proc/net/pktgen/pgctrl ] && echo stop >/proc/net/pktgen/pgctrl
	killall iperf3 2>/dev/null
	sleep 1
	return 0
}
# remote COMMAND...: has the sender guest run COMMAND (serve_one) and prints its answer.
remote() {
	echo "$*" | nc 10.9.9.1 7000
}
# The card's test-control window (qemu-card/src/ctl.rs), with a card sender: the BAR of its own
# PCI function, which no driver binds, through devmem (ctl.sh, written by cargo xtask from
# ctl.rs: ctl_wr OFFSET VALUE, ctl_rd OFFSET, the offsets as CTL_<register>).
. /etc/onic/ctl.sh
[ $SENDER = card ] && ctl_open
# gen_start SIZE MAC [PORT]: the card's generator starts sending SIZE-byte UDP frames (FCS
# included) to MAC, 192.0.2.2 and port PORT (9 unless given) into port 0, one every GEN_NS ns.
gen_start() {
	m=$(echo $2 | tr -d :)
	ctl_wr $CTL_GEN_PORT 0
	# The card's port 0 itself receives them, or (virtio) they leave it for the hub it shares
	# with the virtio NIC.
	ctl_wr $CTL_GEN_EGRESS $([ $DEV = virtio ] && echo 1 || echo 0)
	ctl_wr $CTL_GEN_LEN $(($1 - 4))
	ctl_wr $CTL_GEN_INTERVAL_NS $GEN_NS
	ctl_wr $CTL_GEN_DST_MAC_HI $((0x${m%????????}))
	ctl_wr $CTL_GEN_DST_MAC_LO $((0x${m#????}))
	ctl_wr $CTL_GEN_DST_IP $((0xc0000202))
	ctl_wr $CTL_GEN_DST_PORT ${3:-9}
	GEN0=$(ctl_rd $CTL_GEN_FRAMES) RX0=$($NS cat /sys/class/net/$P1/statistics/rx_packets)
	ctl_wr $CTL_GEN_RUN 1
}
# gen_stop: it stops; how many frames it sent and how many the port received meanwhile.
gen_stop() {
	ctl_wr $CTL_GEN_RUN 0
	sleep 1
	echo "== card generator: $(($(ctl_rd $CTL_GEN_FRAMES) - GEN0)) frames sent, $P1 received $(($($NS cat /sys/class/net/$P1/statistics/rx_packets) - RX0))"
}
# send_start KIND ARGS...: traffic of KIND (pktgen SIZE MAC [PORT], or iperf3 ARGS...) starts,
# from the card's generator (pktgen's arguments), from the sender guest or from this guest's
# other port, through the same command server (serve_one): pktgen on P0 (in the first namespace
# with the XDP benches' ports), iperf3 from namespace a.
send_start() {
	if [ $SENDER = card ]; then
		shift
		gen_start "$@"
	elif [ $SENDER = guest ]; then
		remote "$@" >/dev/null
	elif [ $1 = pktgen ]; then
		echo "$*" | PKTGEN_IF=$P0 /init serve >/dev/null
	else
		echo "$*" | $IP netns exec a /init serve >/dev/null
	fi
}
send_stop() {
	if [ $SENDER = card ]; then
		gen_stop
	elif [ $SENDER = guest ]; then
		remote stop >/dev/null
	else
		echo stop | /init serve >/dev/null
	fi
}

# ifaces: P0 and P1, the two cabled ports of the device; with a sender guest, P1 is the
# device's port cabled to it (port 0 of the card, the virtio data NIC) and P0 is not used.
ifaces() {
	drv=onic
	[ $DEV = virtio ] && drv=virtio_net
	set -- $(for n in /sys/class/net/*; do
		[ "$(basename "$(readlink $n/device/driver 2>/dev/null)")" = $drv ] &&
			[ "$(cat $n/address)" != $CTL_RECEIVER ] && basename $n
	done | sort)
	if [ $DEV = sim ]; then
		P0=onicsim0 P1=onicsim1
	elif [ $SENDER != same ] && [ $DEV = virtio ]; then
		P0=none P1=$(by_mac $DATA_RECEIVER)
	elif [ $SENDER != same ]; then
		P0=none P1=$1
	else
		P0=$1 P1=$2
	fi
}
# load ARGS...: the driver with ARGS (onic.ko's module parameters; the virtio driver has none and
# stays loaded).
load() {
	case $DEV in
	sim) insmod $KO sim=1 "$@" ;;
	pci) insmod $KO "$@" ;;
	virtio) virtio_up ;;
	esac
	sleep 1
	ifaces
	[ -n "$P0" ] && [ -n "$P1" ] || return 1
	# IRQS: the /proc/interrupts names of P1's receive vectors (snap): the card's queue vectors
	# are named after the netdev, virtio's after its virtio device ("virtio1-input.0").
	if [ $DEV = virtio ]; then
		IRQS="$(basename "$(readlink /sys/class/net/$P1/device)")-input"
	else
		IRQS="$P1-q"
	fi
	# COALESCE: an `ethtool -C` setting for both ports (e.g. "adaptive-rx on").
	if [ -n "$COALESCE" ]; then
		{ [ $SENDER != same ] || ethtool -C $P0 $COALESCE; } && ethtool -C $P1 $COALESCE ||
			echo "== ethtool -C $COALESCE refused"
	fi
	return 0
}
unload() {
	[ $DEV = virtio ] || rmmod onic
}
# up ARGS...: the driver with ARGS, each port in its own namespace (with a sender guest, only
# the receiving port, in the second).
up() {
	load "$@" || return 1
	$IP netns add b
	$IP link set $P1 netns b
	$IP -n b addr add 192.0.2.2/24 dev $P1
	$IP -n b link set $P1 up
	if [ $SENDER = same ]; then
		$IP netns add a
		$IP link set $P0 netns a
		$IP -n a addr add 192.0.2.1/24 dev $P0
		$IP -n a link set $P0 up
	fi
	sleep 2
	[ $SENDER = card ] && return 0
	$IP netns exec b ping -c 2 -W 5 192.0.2.1 >/dev/null 2>&1 && echo "== $P1: the sender answers" ||
		echo "== $P1: no answer from the sender"
}
down() {
	$IP netns del b
	[ $SENDER = same ] && $IP netns del a
	sleep 1
	unload
}
# snap NETNS-PREFIX: one process reads, at one moment, the guest's time since boot and idle
# time in nanoseconds (one CPU under icount: busy = up - idle, in instructions; from the tick
# code's own counters in /proc/timer_list, "now at" and each CPU's idle_sleeptime, because
# /proc/uptime counts in 10 ms steps, 100 instructions a packet over a 2 s window of XDP_DROP;
# /proc/uptime where timer_list is missing or with more than one CPU, whose idle_sleeptime
# leaves out an idle period still running: FINE_CLOCK), the time the card model's engine has run
# (simulation mode: its instructions under icount, else 0), P1's received packets and bytes, and
# the interrupts its receive vectors took (IRQS, from load).
FINE_CLOCK=$([ -r /proc/timer_list ] && [ "$(grep -c '^processor' /proc/cpuinfo)" = 1 ] && echo 1 || echo 0)
snap() {
	$1 sh -c "{ [ $FINE_CLOCK = 1 ] && awk '/^now at/ { print \$3 } /idle_sleeptime/ { s += \$3 } END { printf \"%.0f\\n\", s }' /proc/timer_list ||
		awk '{ printf \"%.0f %.0f\\n\", \$1 * 1e9, \$2 * 1e9 }' /proc/uptime; }
		cat /sys/module/onic/parameters/sim_model_ns 2>/dev/null || echo 0;
		cat /sys/class/net/$P1/statistics/rx_packets /sys/class/net/$P1/statistics/rx_bytes;
		awk -v p='$IRQS' '\$NF ~ \"^\" p { for (i = 2; i <= NF; i++) if (\$i ~ /^[0-9]+\$/) s += \$i; else break } END { print s + 0 }' /proc/interrupts" | tr '\n' ' '
}
# window NETNS-PREFIX: once traffic arrives at P1, measures SECS of it in steady state. Prints
# "packets bytes busy_ns model_ns irqs" of the window, or nothing when no traffic came (60 s).
# Setup and teardown (processes starting, connections, ARP) stay outside the window, so the
# instructions are those of the running datapath (and of the one process that takes the second
# snapshot).
window() {
	set -- "$1" $(snap "$1")
	r0=$5
	n=0
	while [ $(snap "$1" | awk '{ print $4 }') -lt $((r0 + 200)) ]; do
		[ $n -ge 600 ] && return 0
		sleep 0.1
		n=$((n + 1))
	done
	sleep 1
	[ "$PROFILE" = 1 ] && onic_prof start
	s0=$(snap "$1")
	sleep $SECS
	s1=$(snap "$1")
	[ "$PROFILE" = 1 ] && onic_prof stop && prof_window
	delta $s0 $s1
}
# delta SNAP0 SNAP1 (snap's six words each): "packets bytes busy_ns model_ns irqs" between the
# two.
delta() {
	awk -v u0=$1 -v i0=$2 -v m0=$3 -v p0=$4 -v b0=$5 -v q0=$6 -v u1=$7 -v i1=$8 -v m1=$9 -v p1=${10} \
		-v b1=${11} -v q1=${12} \
		'BEGIN { printf "%.0f %.0f %.0f %.0f %.0f\n", p1 - p0, b1 - b0, (u1 - u0) - (i1 - i0), m1 - m0, q1 - q0 }'
}
# prof_kernel: the kernel's own text symbols, once per boot, for the profile.
prof_kernel() {
	[ "$PROFILE" = 1 ] || return 0
	{
		echo @kernel
		awk 'NF == 3 && $2 ~ /^[tTwW]$/ { print $1, $3 }' /proc/kallsyms
	} | onic_prof dump
}
# prof_window: after a profiled window (its number counted in /tmp/prof_windows, as the plugin
# counts its stops), the modules' text symbols as they are loaded now.
prof_window() {
	n=$(cat /tmp/prof_windows 2>/dev/null || echo 0)
	echo $((n + 1)) >/tmp/prof_windows
	{
		echo "@window $n"
		awk 'NF == 4 && $2 ~ /^[tTwW]$/ { print $1, $3, $4 }' /proc/kallsyms
	} | onic_prof dump
}
# prof_figure TABLE CONFIG WHAT COUNT UNIT: the figure the last profiled window measured, and
# the count its instructions are divided by.
prof_figure() {
	[ "$PROFILE" = 1 ] && echo "@figure $*" | onic_prof dump
	return 0
}
# figure TABLE CONFIG WHAT RATE-UNIT PER-UNIT COUNT BUSY MODEL: the rate (COUNT over SECS); with
# icount instead the guest's instructions per COUNT (in simulation mode, the model's share
# beside) and the COUNT of the window. (Under icount an idle guest's clock jumps to its next
# timer, so a rate over guest time says nothing unless the guest was busy all the time.)
figure() {
	if [ "$ICOUNT" != 1 ]; then
		echo "BENCH $1 $2 $3 $(($6 / SECS)) $4"
		return 0
	fi
	echo "BENCH $1 $2 $3_insn $([ $6 -gt 0 ] && echo $(($7 / $6)) || echo 0) $5"
	[ $DEV = sim ] && echo "BENCH $1 $2 $3_model_insn $([ $6 -gt 0 ] && echo $(($8 / $6)) || echo 0) $5"
	echo "BENCH $1 $2 $3_count $6 ${5#insn/}s"
	return 0
}
# measure TABLE CONFIG WHAT KIND ARGS...: traffic of KIND (see send_start) into P1, measured
# over a window; `tcp` figures are Mbit/s and instructions per KiB, the others packets.
measure() {
	table=$1 config=$2 what=$3
	shift 3
	send_start "$@"
	set -- $(window "$NS") 0 0 0 0 0
	send_stop
	if [ $what = tcp ]; then
		figure $table $config $what KiB/s insn/KiB $(($2 / 1024)) $3 $4
		prof_figure $table $config $what $(($2 / 1024)) insn/KiB
	else
		figure $table $config $what $UNIT/s insn/$UNIT $1 $3 $4
		prof_figure $table $config $what $1 insn/$UNIT
	fi
	# On the card and on virtio, the interrupts of P1's receive vectors per 1000 frames of the
	# window.
	[ $DEV != sim ] && echo "BENCH $table $config ${what}_irq $([ $1 -gt 0 ] && echo $(($5 * 1000 / $1)) || echo 0) irq/k$UNIT"
	return 0
}
# udp TABLE CONFIG: iperf3 UDP at unlimited rate per frame size into P1's namespace; with the
# card's generator, its frames at its interval, read by onic_udp_sink.
udp() {
	NS="$IP netns exec b" UNIT=datagram
	for size in $SIZES; do
		if [ $SENDER = card ]; then
			$IP netns exec b onic_udp_sink 5201 >/tmp/sink.out 2>&1 &
		else
			$IP netns exec b iperf3 -s -p 5201 >/dev/null 2>&1 &
		fi
		srv=$!
		sleep 1
		if [ $SENDER = card ]; then
			measure $1 $2 udp$size card $size $($NS cat /sys/class/net/$P1/address) 5201
		else
			measure $1 $2 udp$size iperf3 -u -b 0 -l $((size - 46)) -t 600
		fi
		kill $srv 2>/dev/null
		wait $srv 2>/dev/null
		[ $SENDER = card ] && echo "== $(cat /tmp/sink.out); UDP in netns b: $($NS awk '/^Udp: [0-9]/ { print "InDatagrams " $2 ", NoPorts " $3 ", InErrors " $4 ", RcvbufErrors " $6 }' /proc/net/snmp)"
	done
	return 0
}
# tcp TABLE CONFIG: one iperf3 TCP stream (none from the card's generator, which does not
# answer).
tcp() {
	[ $SENDER = card ] && return 0
	NS="$IP netns exec b"
	$IP netns exec b iperf3 -s -p 5201 >/dev/null 2>&1 &
	srv=$!
	sleep 1
	measure $1 $2 tcp iperf3 -t 600
	kill $srv 2>/dev/null
	wait $srv 2>/dev/null
	return 0
}
# xdp_verdict_bench CONFIG ACTION: with `xdp-bench ACTION` (drop, or tx: MACs swapped, back out
# of the port) on P1, the kernel's pktgen sends at full speed per frame size, from P0 (both ports
# in the first namespace: pktgen needs no route) or from the sender guest; counted by P1's
# rx_packets (frames received, whatever the verdict).
xdp_verdict_bench() {
	load || return 1
	[ $SENDER = same ] && $IP link set $P0 up
	$IP link set $P1 up
	sleep 2
	MAC1=$(cat /sys/class/net/$P1/address)
	NS= UNIT=packet
	for size in $SIZES; do
		xdp-bench $2 -i 1 $P1 >/tmp/xb.log 2>&1 &
		xb=$!
		n=0
		while [ $n -lt 60 ] && ! $IP link show $P1 | grep -q xdp; do sleep 1; n=$((n + 1)); done
		# A program already on the port is not xdp-bench's: it refuses to replace it and exits
		# (the loop above then saw the other program at once, so give it a moment to).
		sleep 1
		if ! kill -0 $xb 2>/dev/null; then
			tail -2 /tmp/xb.log | sed "s/^/== xdp-bench $2 on $P1 did not start: /"
			continue
		fi
		measure xdp_$2 $1 $2$size pktgen $size $MAC1
		kill -INT $xb 2>/dev/null
		wait $xb 2>/dev/null
		# xdp-bench's own count (its program's counters, from attach to exit): the driver's
		# rx_packets must include the frames the program handled, or the two disagree.
		counted=$(awk '/Packets received/ { print $NF }' /tmp/xb.log | tail -1)
		if [ -n "$counted" ]; then
			echo "BENCH xdp_$2 $1 counted$size $counted packets"
		else
			tail -5 /tmp/xb.log | sed "s/^/== xdp-bench $2 on $P1: /"
		fi
	done
	[ $SENDER = same ] && echo "rem_device_all" >/proc/net/pktgen/kpktgend_0
	unload
}

# xsk_bind KIND MODE: onic_xsk started on P1's queue 0 ($xp), once its sockets are bound. The
# socket of the previous size is released after an RCU grace period, and a bind before then is
# refused with EBUSY: up to 10 tries, a second apart. The output of the previous run goes first:
# the shell may look at the file before the new process has truncated it (one vCPU runs the
# parent first), and the old "bound" line would pass for the new one's. Its run time and
# deadline are both past anything a configuration takes (the deadline defaults to 60 s).
xsk_bind() {
	try=0
	while :; do
		rm -f /tmp/xsk.out
		onic_xsk $1 $P1 -q 0 -m $2 -f 4096 -t 900 -d 960 >/tmp/xsk.out 2>&1 &
		xp=$!
		n=0
		while [ $n -lt 60 ] && kill -0 $xp 2>/dev/null && ! grep -q '^bound ' /tmp/xsk.out 2>/dev/null; do
			sleep 1
			n=$((n + 1))
		done
		grep -q '^bound ' /tmp/xsk.out && return 0
		wait $xp 2>/dev/null
		try=$((try + 1))
		[ $try -ge 10 ] && return 1
		sleep 1
	done
}
# xsk_bench CONFIG KIND MODE: AF_XDP on the receiving port's one queue (ethtool -L combined 1):
# os-linux/vm/onic_xsk.c in KIND (rxdrop, or l2fwd: MACs swapped and sent back) with MODE (zc
# or copy); its filter redirects UDP to port 7777 into the socket, and pktgen sends exactly that,
# per frame size. Counted by the port's rx_packets, as the XDP tables.
xsk_bench() {
	load || return 1
	[ $SENDER = same ] && $IP link set $P0 up
	ethtool -L $P1 combined 1 2>/dev/null
	$IP link set $P1 up
	sleep 2
	MAC1=$(cat /sys/class/net/$P1/address)
	NS= UNIT=packet
	for size in $SIZES; do
		if xsk_bind $2 $3 && grep -q "^bound .*zerocopy=$([ $3 = zc ] && echo 1 || echo 0)" /tmp/xsk.out; then
			measure xsk $1 $2$size pktgen $size $MAC1 7777 >/tmp/xsk.fig
		else
			echo "== onic_xsk $2 $3 on $P1 did not bind as asked: $(tail -2 /tmp/xsk.out | tr '\n' ' ')"
			: >/tmp/xsk.fig
		fi
		# The figures count only if the socket was there all through the window.
		alive=$(kill -0 $xp 2>/dev/null && echo yes || echo no)
		kill -INT $xp 2>/dev/null
		wait $xp 2>/dev/null
		if [ $alive = yes ] && grep -q ' exit=done' /tmp/xsk.out; then
			cat /tmp/xsk.fig
		elif [ -s /tmp/xsk.fig ]; then
			echo "== onic_xsk $2 $3 $size ended before the window did: its figures are left out"
		fi
		echo "== onic_xsk $2 $3 $size: $(tail -1 /tmp/xsk.out)"
	done
	[ $SENDER = same ] && echo "rem_device_all" >/proc/net/pktgen/kpktgend_0
	unload
}

# sender: the second guest's part. Its virtio data NIC is 192.0.2.1 (cabled to the receiver's
# device), its control NIC 10.9.9.1; it runs what the receiver asks until asked to stop.
sender() {
	virtio_up
	D=$(by_mac $DATA_SENDER)
	C=$(by_mac $CTL_SENDER)
	$IP addr add 192.0.2.1/24 dev $D
	$IP addr add 10.9.9.1/24 dev $C
	$IP link set $D up
	$IP link set $C up
	printf '#!/bin/sh\nexec /init serve\n' >/bin/onic-bench-serve
	chmod +x /bin/onic-bench-serve
	echo "== sender ready: data $D, control $C"
	# Each connection is one command; a receiver that never asks again ends it after 30 min.
	while [ ! -e /tmp/quit ] && timeout 1800 nc -l -p 7000 -e /bin/onic-bench-serve; do :; done
}

# serve_one: one command (see send_start), on stdin; its answer goes back. pktgen sends from
# PKTGEN_IF when set, else from the sender guest's data NIC.
serve_one() {
	read cmd args
	case $cmd in
	pktgen) pktgen_start "${PKTGEN_IF:-$(by_mac $DATA_SENDER)}" $args ;;
	iperf3) iperf3_start $args ;;
	stop) traffic_stop ;;
	quit) touch /tmp/quit ;;
	esac
	echo ok
}

if [ "$SERVE" = serve ]; then
	serve_one
	exit 0
fi
insmod /lib/modules/pktgen.ko
if [ $ROLE = sender ]; then
	sender
	echo "VM-BENCH SENDER DONE"
	poweroff -f
fi
prof_kernel
if [ $SENDER = guest ]; then
	virtio_up
	C=$(by_mac $CTL_RECEIVER)
	$IP addr add 10.9.9.2/24 dev $C
	$IP link set $C up
	n=0
	until [ "$(remote hello 2>/dev/null)" = ok ] || [ $n -ge 600 ]; do sleep 1; n=$((n + 1)); done
fi
if [ $DEV = virtio ]; then
	# The peer: one configuration per table, the same tools and namespaces.
	if want memory; then
		up && udp memory virtio_net && tcp memory virtio_net
		down
	fi
	if want xdp; then
		up && udp xdp virtio_net && $IP -n b link set dev $P1 xdpdrv obj /xdp/xdp_pass.o sec xdp && udp xdp virtio_net_xdp_pass
		# The virtio driver stays loaded, and the program would stay attached through the
		# namespace's removal: the next table's xdp-bench could not attach its own.
		$IP -n b link set dev $P1 xdpdrv off
		down
	fi
	want xdp_drop && xdp_verdict_bench virtio_net drop
	want xdp_tx && xdp_verdict_bench virtio_net tx
else
	# (a) the memory model: page_pool against a page allocated and mapped per packet
	want memory && for mode in "page_pool 1" "page_per_packet 0"; do
		set -- $mode
		up rx_page_pool=$2 && udp memory "$1" && tcp memory "$1"
		down
	done
	# ... and page_pool with adaptive RX interrupt moderation (the kernel's DIM)
	if want memory; then
		COALESCE="adaptive-rx on"
		up && udp memory page_pool_adaptive && tcp memory page_pool_adaptive
		down
		COALESCE=
	fi
	# ... and page_pool without the software RX hash (`-K rxhash off`): what virtio_net does
	# here, which sets no hash, so that the two compare like for like
	if want memory; then
		up && $IP netns exec b ethtool -K $P1 rxhash off &&
			echo "== $P1: $($IP netns exec b ethtool -k $P1 | grep receive-hashing)" &&
			udp memory page_pool_no_rxhash && tcp memory page_pool_no_rxhash
		down
	fi
	# (b) XDP: not built in, built in with no program, an XDP_PASS program
	if want xdp; then
		up xdp=0 && udp xdp no_xdp
		down
		up && udp xdp no_program
		$IP -n b link set dev $P1 xdpdrv obj /xdp/xdp_pass.o sec xdp && udp xdp xdp_pass
		down
	fi
	# (c) XDP_DROP and XDP_TX per frame size, with the fixed and then the adaptive RX
	# interrupt moderation (the kernel's DIM)
	for v in drop tx; do
		want xdp_$v || continue
		xdp_verdict_bench onic $v
		COALESCE="adaptive-rx on"
		xdp_verdict_bench onic_adaptive $v
		COALESCE=
	done
	# (c2) XDP_DROP and XDP_TX under three fixed moderation settings (ethtool -C
	# rx-usecs/rx-frames, the QDMA's timer and count thresholds), on the card, where the queue
	# vectors are interrupts: the interrupts per frame as the thresholds rise.
	if want moderation && [ $DEV = pci ]; then
		for v in drop tx; do
			for us in 1 5 20; do
				case $us in 1) fr=64 ;; 5) fr=96 ;; 20) fr=192 ;; esac
				COALESCE="rx-usecs $us rx-frames $fr"
				xdp_verdict_bench onic_${us}us_$fr $v
			done
		done
		COALESCE=
	fi
	# (d) AF_XDP: rxdrop and l2fwd, zero copy and copy mode (on the card: the model inside the
	# kernel has no DMA device, so no zero copy)
	if want xsk && [ $DEV = pci ]; then
		for k in rxdrop l2fwd; do
			xsk_bench zc $k zc
			xsk_bench copy $k copy
		done
	fi
fi
[ $SENDER = guest ] && remote quit >/dev/null

echo "VM-BENCH DONE"
printf "\\$(printf %o 16)" | dd of=/dev/port bs=1 seek=244 count=1 2>/dev/null
poweroff -f
