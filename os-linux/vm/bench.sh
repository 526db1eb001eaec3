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
# Under QEMU's -icount shift=0,sleep=off (onic_bench_icount=1) one guest instruction is one
# nanosecond of guest time, so the guest's busy time is its instruction count: each rate gets a
# second figure, the guest's instructions per packet (per KiB for TCP), measured as the busy
# time (elapsed minus idle, /proc/uptime, 10 ms resolution) over the packets counted.
/bin/busybox --install -s /bin
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
IP=/usr/sbin/ip
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /run /var /tmp
ln -s /run /var/run
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
mount -t bpf bpf /sys/fs/bpf
KO=/lib/modules/onic.ko
SECS=$(sed -n 's/.*onic_bench_secs=\([0-9]*\).*/\1/p' /proc/cmdline)
SECS=${SECS:-5}
DEV=$(sed -n 's/.*onic_bench_dev=\([a-z]*\).*/\1/p' /proc/cmdline)
DEV=${DEV:-sim}
ICOUNT=$(sed -n 's/.*onic_bench_icount=\([01]\).*/\1/p' /proc/cmdline)
# Frame sizes on the wire (with the 4-byte FCS); UDP payload = size - 46.
SIZES="1518 1000 500 250 64"

echo "== onic VM benchmark on Linux $(uname -r), device $DEV, $SECS s per figure, icount ${ICOUNT:-0}, $(grep -c ^processor /proc/cpuinfo) CPU"

# ifaces: P0 and P1, the two cabled ports of the device.
ifaces() {
	case $DEV in
	sim) P0=onicsim0 P1=onicsim1 ;;
	*)
		drv=onic
		[ $DEV = virtio ] && drv=virtio_net
		set -- $(for n in /sys/class/net/*; do
			[ "$(basename "$(readlink $n/device/driver 2>/dev/null)")" = $drv ] && basename $n
		done | sort)
		P0=$1 P1=$2
		;;
	esac
}
# load ARGS...: the driver with ARGS (onic.ko's module parameters; the virtio driver has none and
# stays loaded).
load() {
	case $DEV in
	sim) insmod $KO sim=1 "$@" ;;
	pci) insmod $KO "$@" ;;
	virtio) [ -d /sys/module/virtio_net ] || for m in virtio virtio_ring virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci failover net_failover virtio_net; do
		insmod /lib/modules/$m.ko 2>/dev/null
	done ;;
	esac
	sleep 1
	ifaces
	[ -n "$P0" ] && [ -n "$P1" ]
}
unload() {
	[ $DEV = virtio ] || rmmod onic
}
# up ARGS...: the driver with ARGS, each port in its own namespace.
up() {
	load "$@" || return 1
	$IP netns add a
	$IP netns add b
	$IP link set $P0 netns a
	$IP link set $P1 netns b
	$IP -n a addr add 192.0.2.1/24 dev $P0
	$IP -n b addr add 192.0.2.2/24 dev $P1
	$IP -n a link set $P0 up
	$IP -n b link set $P1 up
	sleep 2
}
down() {
	$IP netns del a
	$IP netns del b
	sleep 1
	unload
}
# busy_mark: the guest's uptime and idle time so far (one CPU under icount: busy = up - idle).
busy_mark() { cat /proc/uptime; }
# insn MARK COUNT: the guest's instructions since MARK per COUNT (one decimal of a unit is kept).
insn() {
	set -- $1 $2 $(cat /proc/uptime) $3
	awk -v u0="$1" -v i0="$2" -v u1="$3" -v i1="$4" -v n="$5" \
		'BEGIN { b = (u1 - u0) - (i1 - i0); if (n > 0 && b > 0) printf "%d\n", b * 1e9 / n; else print 0 }'
}
# figure TABLE CONFIG WHAT VALUE UNIT [MARK COUNT INSN-UNIT]: one rate, and with icount the
# instructions per INSN-UNIT beside it.
figure() {
	echo "BENCH $1 $2 $3 $4 $5"
	[ "$ICOUNT" = 1 ] && [ -n "$6" ] && echo "BENCH $1 $2 $3_insn $(insn "$6" "$7") $8"
}
# udp TABLE CONFIG: iperf3 UDP at unlimited rate per frame size, datagrams per second received.
udp() {
	for size in $SIZES; do
		len=$((size - 46))
		$IP netns exec b iperf3 -s -1 -p 5201 >/dev/null 2>&1 &
		srv=$!
		sleep 1
		m=$(busy_mark)
		timeout $((SECS * 20 + 30)) $IP netns exec a iperf3 -c 192.0.2.2 -p 5201 -u -b 0 -l $len -t "$SECS" -J >/tmp/u.json 2>&1
		got=$(awk '/"sum_received"/ { f = 1 } f && /"bytes"/ { gsub(/[^0-9]/, ""); print; exit }' /tmp/u.json)
		n=$((${got:-0} / len))
		figure $1 $2 udp$size $((n / SECS)) datagrams/s "$m" $n insn/datagram
		kill $srv 2>/dev/null
		wait $srv 2>/dev/null
	done
}
# tcp TABLE CONFIG: one iperf3 TCP stream, receiver Mbit/s.
tcp() {
	$IP netns exec b iperf3 -s -1 -p 5201 >/dev/null 2>&1 &
	srv=$!
	sleep 1
	m=$(busy_mark)
	timeout $((SECS * 40 + 30)) $IP netns exec a iperf3 -c 192.0.2.2 -p 5201 -t $((SECS * 2)) -J >/tmp/t.json 2>&1
	got=$(awk '/"sum_received"/ { f = 1 } f && /"bytes"/ { gsub(/[^0-9]/, ""); print; exit }' /tmp/t.json)
	figure $1 $2 tcp $((${got:-0} * 8 / (SECS * 2) / 1000000)) Mbit/s "$m" $((${got:-0} / 1024)) insn/KiB
	kill $srv 2>/dev/null
	wait $srv 2>/dev/null
}
# xdp_drop_bench CONFIG: XDP_DROP rate per size: the kernel's pktgen sends from P0 at full speed,
# xdp-bench drop drops on P1 (both ports in the first namespace: pktgen needs no route). The rate
# is P1's rx_packets (frames received, whatever the verdict) over exactly the time pktgen sends.
xdp_drop_bench() {
	load || return 1
	$IP link set $P0 up
	$IP link set $P1 up
	sleep 2
	MAC1=$(cat /sys/class/net/$P1/address)
	PG=/proc/net/pktgen
	echo "rem_device_all" >$PG/kpktgend_0
	echo "add_device $P0" >$PG/kpktgend_0
	for size in $SIZES; do
		for c in "count 0" "pkt_size $((size - 4))" "delay 0" "dst_mac $MAC1" "dst 192.0.2.2" "udp_dst_min 9" "udp_dst_max 9"; do
			echo "$c" >$PG/$P0
		done
		timeout $((SECS * 20 + 60)) xdp-bench drop -i 1 $P1 >/tmp/xb.log 2>&1 &
		xb=$!
		n=0
		while [ $n -lt 60 ] && ! $IP link show $P1 | grep -q xdp; do sleep 1; n=$((n + 1)); done
		r0=$(cat /sys/class/net/$P1/statistics/rx_packets)
		m=$(busy_mark)
		echo start >$PG/pgctrl &
		pg=$!
		sleep "$SECS"
		r1=$(cat /sys/class/net/$P1/statistics/rx_packets)
		cnt=$((r1 - r0))
		figure xdp_drop $1 drop$size $((cnt / SECS)) packets/s "$m" $cnt insn/packet
		echo stop >$PG/pgctrl
		wait $pg 2>/dev/null
		kill -INT $xb 2>/dev/null
		wait $xb 2>/dev/null
		# xdp-bench's own count (its program's counters, from attach to exit): the driver's
		# rx_packets must include the frames the program dropped, or the two disagree.
		echo "BENCH xdp_drop $1 counted$size $(awk '/Packets received/ { print $NF }' /tmp/xb.log | tail -1) packets"
	done
	echo "rem_device_all" >$PG/kpktgend_0
	unload
}

insmod /lib/modules/pktgen.ko
if [ $DEV = virtio ]; then
	# The peer: one configuration per table, the same tools and namespaces.
	up && udp memory virtio_net && tcp memory virtio_net
	down
	up && udp xdp virtio_net && $IP -n b link set dev $P1 xdpdrv obj /xdp/xdp_pass.o sec xdp && udp xdp virtio_net_xdp_pass
	down
	xdp_drop_bench virtio_net
else
	# (a) the memory model: page_pool against a page allocated and mapped per packet
	for mode in "page_pool 1" "page_per_packet 0"; do
		set -- $mode
		up rx_page_pool=$2 && udp memory "$1" && tcp memory "$1"
		down
	done
	# (b) XDP: not built in, built in with no program, an XDP_PASS program
	up xdp=0 && udp xdp no_xdp
	down
	up && udp xdp no_program
	$IP -n b link set dev $P1 xdpdrv obj /xdp/xdp_pass.o sec xdp && udp xdp xdp_pass
	down
	# (c) XDP_DROP per frame size
	xdp_drop_bench onic
fi

echo "VM-BENCH DONE"
printf "\\$(printf %o 16)" | dd of=/dev/port bs=1 seek=244 count=1 2>/dev/null
poweroff -f
