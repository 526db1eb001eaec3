#!/bin/busybox sh
# /init of the VM benchmark (cargo xtask vm-bench): the module in simulation mode, traffic across
# the model's cable, the same configurations side by side in one boot. Each figure is one line
#   BENCH <table> <configuration> <what> <value> <unit>
# which the xtask turns into the tables of docs/benchmarks.md. The model runs inside this kernel,
# so the absolute numbers are the model's; the ratios between configurations are the point.
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
# Frame sizes on the wire (with the 4-byte FCS); UDP payload = size - 46.
SIZES="1518 1000 500 250 64"

echo "== onic VM benchmark on Linux $(uname -r), $SECS s per figure"

# up ARGS...: the module with ARGS, each port in its own namespace.
up() {
	insmod $KO sim=1 "$@" || return 1
	$IP netns add a
	$IP netns add b
	$IP link set onicsim0 netns a
	$IP link set onicsim1 netns b
	$IP -n a addr add 192.0.2.1/24 dev onicsim0
	$IP -n b addr add 192.0.2.2/24 dev onicsim1
	$IP -n a link set onicsim0 up
	$IP -n b link set onicsim1 up
	sleep 2
}
down() {
	rmmod onic
	$IP netns del a
	$IP netns del b
}
# udp TABLE CONFIG: iperf3 UDP at unlimited rate per frame size, datagrams per second received.
udp() {
	for size in $SIZES; do
		len=$((size - 46))
		$IP netns exec b iperf3 -s -1 -p 5201 >/dev/null 2>&1 &
		srv=$!
		sleep 1
		timeout $((SECS + 30)) $IP netns exec a iperf3 -c 192.0.2.2 -p 5201 -u -b 0 -l $len -t "$SECS" -J >/tmp/u.json 2>&1
		got=$(awk '/"sum_received"/ { f = 1 } f && /"bytes"/ { gsub(/[^0-9]/, ""); print; exit }' /tmp/u.json)
		echo "BENCH $1 $2 udp$size $((${got:-0} / len / SECS)) datagrams/s"
		kill $srv 2>/dev/null
		wait $srv 2>/dev/null
	done
}
# tcp TABLE CONFIG: one iperf3 TCP stream, receiver Mbit/s.
tcp() {
	$IP netns exec b iperf3 -s -1 -p 5201 >/dev/null 2>&1 &
	srv=$!
	sleep 1
	timeout $((SECS * 2 + 30)) $IP netns exec a iperf3 -c 192.0.2.2 -p 5201 -t $((SECS * 2)) -J >/tmp/t.json 2>&1
	got=$(awk '/"sum_received"/ { f = 1 } f && /"bytes"/ { gsub(/[^0-9]/, ""); print; exit }' /tmp/t.json)
	echo "BENCH $1 $2 tcp $((${got:-0} * 8 / (SECS * 2) / 1000000)) Mbit/s"
	kill $srv 2>/dev/null
	wait $srv 2>/dev/null
}

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
$IP -n b link set dev onicsim1 xdpdrv obj /xdp/xdp_pass.o sec xdp && udp xdp xdp_pass
down

# (c) XDP_DROP rate per size: the kernel's pktgen sends from port 0 at full speed, xdp-bench
# drop counts on port 1 (both ports in the first namespace: pktgen needs no route).
insmod /lib/modules/pktgen.ko
insmod $KO sim=1
$IP link set onicsim0 up
$IP link set onicsim1 up
sleep 2
MAC1=$(cat /sys/class/net/onicsim1/address)
PG=/proc/net/pktgen
echo "rem_device_all" >$PG/kpktgend_0
echo "add_device onicsim0" >$PG/kpktgend_0
for size in $SIZES; do
	for c in "count 0" "pkt_size $((size - 4))" "delay 0" "dst_mac $MAC1" "dst 192.0.2.2" "udp_dst_min 9" "udp_dst_max 9"; do
		echo "$c" >$PG/onicsim0
	done
	# xdp-bench attaches its XDP_DROP program and counts; the rate is the driver's rx_xdp_drop
	# over exactly the time pktgen sends.
	timeout $((SECS + 10)) xdp-bench drop -i 1 onicsim1 >/tmp/xb.log 2>&1 &
	xb=$!
	sleep 2
	d0=$(ethtool -S onicsim1 | sed -n 's/^ *rx_xdp_drop: //p')
	echo start >$PG/pgctrl &
	pg=$!
	sleep "$SECS"
	d1=$(ethtool -S onicsim1 | sed -n 's/^ *rx_xdp_drop: //p')
	echo stop >$PG/pgctrl
	wait $pg 2>/dev/null
	kill $xb 2>/dev/null
	wait $xb 2>/dev/null
	seen=$(awk '/Packets received/ { print $NF }' /tmp/xb.log)
	echo "BENCH xdp_drop xdp_bench drop$size $(((${d1:-0} - ${d0:-0}) / SECS)) packets/s"
	echo "BENCH xdp_drop xdp_bench counted$size ${seen:-0} packets"
done
rmmod onic

echo "VM-BENCH DONE"
printf "\\$(printf %o 16)" | dd of=/dev/port bs=1 seek=244 count=1 2>/dev/null
poweroff -f
