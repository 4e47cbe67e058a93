package mpitest

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Hosts are hosts simulated on this machine for mpirun to launch across:
// each is a network namespace with an address of its own on a bridge of
// the root namespace (where mpirun runs), and each command mpirun starts
// there runs in a UTS namespace with the host's own host name (so that
// PMIx reports one node per host, and the daemons' session directories,
// named after the host, are apart). mpirun reaches the hosts through a
// launcher agent script given in place of ssh (plm_rsh_agent), and its
// daemons (orted) connect back to it over the bridge.
type Hosts struct {
	t      testing.TB
	subnet netip.Prefix // the hosts' subnet; the bridge has its .254
	dir    string       // the launcher agent, the relay, the daemons' session directories
	agent  string       // the launcher agent script
	bridge string
	split  string // the bridge of the hosts Split off, once made
	hosts  []host
	once   sync.Once
}

// hostsSeq tells apart the Hosts of one test process.
var hostsSeq atomic.Int32

type host struct {
	name     string     // network namespace (and host name unless hostname is set)
	hostname string     // host name (HostsOptions.Names), "" for name
	addr     netip.Addr // its address, and its name for mpirun
	port     string     // its link's end on the bridge (LinkDown cuts it)
	links    []string   // root-namespace links to delete at the end
	relay    *relay     // when its link can be delayed (and lossy)
}

// EnvRequireHosts, set to 1 in the environment (as scripts/test.sh does),
// makes NeedHosts and NewHosts fail the test where they would skip it, so
// that a test run meant to cover the multi-host tests cannot pass without
// them.
const EnvRequireHosts = "VIGIL_REQUIRE_HOSTS"

// skipHosts skips t saying why simulated hosts cannot be built, or fails
// it when EnvRequireHosts is set.
func skipHosts(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv(EnvRequireHosts) == "1" {
		t.Fatalf(format+" (%s=1: required)", append(args, EnvRequireHosts)...)
		return
	}
	t.Skipf(format, args...)
}

// NeedHosts skips the test unless it can build Hosts: root, ip(8),
// unshare(1) and mpirun are needed. With EnvRequireHosts set it fails
// instead.
func NeedHosts(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("mpirun"); err != nil {
		skipHosts(t, "mpirun is not installed (%v); install openmpi-bin and libpmix-dev to run this test", err)
	}
	if os.Geteuid() != 0 {
		skipHosts(t, "simulated hosts need root (network namespaces, a bridge): run the test as root")
	}
	for _, p := range []string{"ip", "unshare"} {
		if _, err := exec.LookPath(p); err != nil {
			skipHosts(t, "simulated hosts need %s (%v): install iproute2 and util-linux", p, err)
		}
	}
}

// HostsOptions are NewHostsWith's options.
type HostsOptions struct {
	// Delayable lists the hosts whose links go through a relay (hostrelay,
	// compiled with cc) so that Delay can slow them down and Loss drop
	// their frames.
	Delayable []int
	// Decoys gives each host, before its link to the bridge, an up
	// interface "decoy0" with an address of its own in another subnet
	// (DecoyAddr), which no other host can reach: in interface order it
	// is the host's first non-loopback address.
	Decoys bool
	// Names are the hosts' names, such as node1 (default: their network
	// namespaces' names, unique to the test process): the host name
	// commands see there, and a name the launcher agent accepts besides
	// the address. HostsFile maps them to the addresses.
	Names []string
}

// NewHosts creates n hosts, deleted when the test ends; the hosts listed
// in delayable can be delayed and made lossy (HostsOptions.Delayable).
func NewHosts(t testing.TB, n int, delayable ...int) *Hosts {
	t.Helper()
	return NewHostsWith(t, n, HostsOptions{Delayable: delayable})
}

// NewHostsWith creates n hosts with options o, deleted when the test
// ends. It skips the test as NeedHosts does, or when there are delayable
// hosts and no C compiler (or fails it, with EnvRequireHosts set).
func NewHostsWith(t testing.TB, n int, o HostsOptions) *Hosts {
	t.Helper()
	NeedHosts(t)
	delayable := o.Delayable
	tag := fmt.Sprintf("vg%d%c", os.Getpid()%100000, 'a'+hostsSeq.Add(1)%26) // names ≤ 15 bytes
	h := &Hosts{t: t, bridge: tag + "br", subnet: freeSubnet(t), dir: t.TempDir()}
	relayBin := ""
	if len(delayable) > 0 {
		var err error
		if relayBin, err = buildRelay(h.dir); err != nil {
			skipHosts(t, "delayable hosts: %v", err)
		}
	}
	t.Cleanup(h.teardown)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	for i := 0; i < n; i++ {
		hs := host{name: fmt.Sprintf("%sh%d", tag, i+1), addr: h.ip(byte(i + 1))}
		if i < len(o.Names) {
			hs.hostname = o.Names[i]
		}
		if out, err := exec.Command("ip", "netns", "add", hs.name).CombinedOutput(); err != nil {
			if i == 0 {
				skipHosts(t, "cannot create a network namespace (ip netns add: %v: %s): simulated hosts need them", err, bytes.TrimSpace(out))
			}
			t.Fatalf("ip netns add %s: %v\n%s", hs.name, err, out)
		}
		h.hosts = append(h.hosts, hs)
	}
	run("link", "add", h.bridge, "type", "bridge")
	run("addr", "add", h.ip(254).String()+"/24", "dev", h.bridge)
	run("link", "set", h.bridge, "up")
	for i := range h.hosts {
		hp := &h.hosts[i]
		if o.Decoys {
			// A veth pair inside the namespace, created first so that its
			// interfaces come before eth0.
			run("-n", hp.name, "link", "add", "decoy0", "type", "veth", "peer", "name", "decoy1")
			run("-n", hp.name, "addr", "add", h.DecoyAddr(i).String()+"/24", "dev", "decoy0")
			run("-n", hp.name, "link", "set", "decoy0", "up")
			run("-n", hp.name, "link", "set", "decoy1", "up")
		}
		link := fmt.Sprintf("%sv%d", tag, i+1)
		run("link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", hp.name)
		hp.links = append(hp.links, link)
		run("-n", hp.name, "addr", "add", hp.addr.String()+"/24", "dev", "eth0")
		run("-n", hp.name, "link", "set", "eth0", "up")
		run("-n", hp.name, "link", "set", "lo", "up")
		if !slices.Contains(delayable, i) {
			hp.port = link
			run("link", "set", link, "master", h.bridge, "up")
			continue
		}
		// The host's link ends in the relay, which passes its frames to a
		// second veth pair whose other end is the bridge port.
		hp.port = fmt.Sprintf("%sp%d", tag, i+1)
		peer := fmt.Sprintf("%sq%d", tag, i+1)
		run("link", "add", hp.port, "type", "veth", "peer", "name", peer)
		hp.links = append(hp.links, hp.port)
		run("link", "set", hp.port, "master", h.bridge, "up")
		for _, l := range []string{link, peer} {
			run("link", "set", l, "up", "promisc", "on")
			os.WriteFile("/proc/sys/net/ipv6/conf/"+l+"/disable_ipv6", []byte("1"), 0)
		}
		r, err := newRelay(relayBin, link, peer)
		if err != nil {
			t.Fatalf("host %d's relay: %v", i, err)
		}
		hp.relay = r
	}
	h.agent = filepath.Join(h.dir, "hostagent")
	if err := os.WriteFile(h.agent, []byte(h.agentScript()), 0o755); err != nil {
		t.Fatal(err)
	}
	return h
}

// freeSubnet returns a 10.79.k.0/24 that no route of the root namespace
// uses.
func freeSubnet(t testing.TB) netip.Prefix {
	t.Helper()
	out, err := exec.Command("ip", "-4", "route", "show").CombinedOutput()
	if err != nil {
		t.Fatalf("ip route: %v\n%s", err, out)
	}
	for i := range 200 {
		k := byte((os.Getpid()+i)%200 + 20)
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 79, k, 0}), 24)
		if !strings.Contains(string(out), p.Addr().String()) {
			return p
		}
	}
	t.Fatal("no free 10.79.k.0/24 subnet")
	return netip.Prefix{}
}

// ip returns the address of the subnet ending in last.
func (h *Hosts) ip(last byte) netip.Addr {
	a := h.subnet.Addr().As4()
	a[3] = last
	return netip.AddrFrom4(a)
}

// agentScript is mpirun's launcher agent: ssh's interface ("agent host
// command..."), run in the host's namespaces.
func (h *Hosts) agentScript() string {
	var b strings.Builder
	b.WriteString(`#!/bin/sh
# mpirun's launcher agent (plm_rsh_agent) in place of ssh: runs the command
# "$2 ..." on host "$1", a network namespace of this machine, with the
# host's name in a UTS namespace of its own.
host=$1
shift
case $host in
`)
	for i, hs := range h.hosts {
		if hs.hostname != "" {
			fmt.Fprintf(&b, "%s|%s) ns=%s name=%s ;;\n", hs.addr, hs.hostname, hs.name, h.HostName(i))
			continue
		}
		fmt.Fprintf(&b, "%s) ns=%s name=%s ;;\n", hs.addr, hs.name, h.HostName(i))
	}
	b.WriteString(`*) echo "$0: unknown host $host" >&2; exit 255 ;;
esac
exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec sh -c "$1"' "$name" "$*"
`)
	return b.String()
}

// N returns the number of hosts.
func (h *Hosts) N() int { return len(h.hosts) }

// Addr returns host i's address, its name for mpirun.
func (h *Hosts) Addr(i int) netip.Addr { return h.hosts[i].addr }

// Name returns host i's network namespace (and host name, unless
// HostsOptions.Names named it).
func (h *Hosts) Name(i int) string { return h.hosts[i].name }

// HostName returns host i's host name: HostsOptions.Names[i], or its
// network namespace's name.
func (h *Hosts) HostName(i int) string { return cmp.Or(h.hosts[i].hostname, h.hosts[i].name) }

// HostsFile returns lines "address name" for every host, in the format of
// /etc/hosts.
func (h *Hosts) HostsFile() string {
	var b strings.Builder
	for i, hs := range h.hosts {
		fmt.Fprintf(&b, "%s %s\n", hs.addr, h.HostName(i))
	}
	return b.String()
}

// Env returns, as OMPI_MCA_ environment variables, the site settings that
// Flags passes on mpirun's command line besides the host list and the
// options that keep a job alive when a host dies: the launcher agent, the
// hosts' subnet for the daemons' and MPI's TCP traffic, and the session
// directories. A cluster keeps such settings in openmpi-mca-params.conf.
func (h *Hosts) Env() []string {
	return []string{"OMPI_MCA_plm_rsh_agent=" + h.agent,
		"OMPI_MCA_oob_tcp_if_include=" + h.subnet.String(), "OMPI_MCA_btl_tcp_if_include=" + h.subnet.String(),
		"OMPI_MCA_orte_tmpdir_base=" + h.dir}
}

// Subnet returns the hosts' subnet.
func (h *Hosts) Subnet() netip.Prefix { return h.subnet }

// Port returns host i's link's end on the bridge, in the root namespace:
// the device where every frame host i sends or receives can be captured.
func (h *Hosts) Port(i int) string { return h.hosts[i].port }

// DecoyAddr returns host i's decoy address (HostsOptions.Decoys): in
// 10.78.k.0/24 where the hosts' subnet is 10.79.k.0/24.
func (h *Hosts) DecoyAddr(i int) netip.Addr {
	a := h.ip(byte(i + 1)).As4()
	a[1] = 78
	return netip.AddrFrom4(a)
}

// FirstAddr returns the first IPv4 address of an up, non-loopback
// interface of host i, in interface order: the address a rank that takes
// the first address would publish there.
func (h *Hosts) FirstAddr(i int) netip.Addr {
	h.t.Helper()
	out, err := exec.Command("ip", "-n", h.hosts[i].name, "-o", "-4", "addr", "show", "up").CombinedOutput()
	if err != nil {
		h.t.Fatalf("ip -n %s addr: %v\n%s", h.hosts[i].name, err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l) // "3: decoy0    inet 10.78.5.1/24 ..."
		if len(f) < 4 || f[1] == "lo" || f[2] != "inet" {
			continue
		}
		if p, err := netip.ParsePrefix(f[3]); err == nil {
			return p.Addr()
		}
	}
	h.t.Fatalf("host %d has no up, non-loopback IPv4 address:\n%s", i, out)
	return netip.Addr{}
}

// Flags returns the mpirun options that launch across the hosts, slots
// ranks per host: the host list; the launcher agent; every daemon started
// by mpirun itself (plm_rsh_no_tree_spawn: the daemons then detach from
// the agent, so mpirun sees a host's daemon die only through its TCP
// connection, which a LinkDown before Kill leaves silent) and connected to
// it directly (routed direct: not through another host's
// daemon, which a dead host would cut off); the daemons' and MPI's TCP
// traffic on the hosts' subnet; session directories in the test's
// temporary directory (a killed daemon leaves its own behind).
func (h *Hosts) Flags(slots int) []string {
	var hl []string
	for _, hs := range h.hosts {
		hl = append(hl, fmt.Sprintf("%s:%d", hs.addr, slots))
	}
	return []string{"--host", strings.Join(hl, ","), "--mca", "plm_rsh_agent", h.agent,
		"--mca", "plm_rsh_no_tree_spawn", "1", "--mca", "routed", "direct",
		"--mca", "oob_tcp_if_include", h.subnet.String(), "--mca", "btl_tcp_if_include", h.subnet.String(),
		"--mca", "orte_tmpdir_base", h.dir}
}

// Start runs mpirun across the hosts, slots ranks per host, as the
// package's Start does (env reaches the ranks only through "-x NAME" in
// extra). When the test ends, every process of the hosts is killed
// before mpirun is.
func (h *Hosts) Start(t testing.TB, n, slots int, env, extra []string, argv ...string) *Job {
	t.Helper()
	j := Start(t, n, env, append(h.Flags(slots), extra...), argv...)
	t.Cleanup(h.teardown) // runs before Start's cleanup, which waits for mpirun's output to end
	return j
}

// PIDs returns the processes running on host i.
func (h *Hosts) PIDs(i int) []int {
	out, _ := exec.Command("ip", "netns", "pids", h.hosts[i].name).Output()
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// RankPIDs returns the PIDs of the ranks running on the hosts by their
// PMIX_RANK, and the host of each rank.
func (h *Hosts) RankPIDs() (pids, hostOf map[int]int) {
	pids, hostOf = map[int]int{}, map[int]int{}
	for i := range h.hosts {
		for _, pid := range h.PIDs(i) {
			if r, ok := pmixRank(pid); ok {
				pids[r], hostOf[r] = pid, i
			}
		}
	}
	return pids, hostOf
}

// WaitPIDs waits up to timeout for n ranks' PIDs (RankPIDs).
func (h *Hosts) WaitPIDs(n int, timeout time.Duration) (pids, hostOf map[int]int) {
	h.t.Helper()
	end := time.Now().Add(timeout)
	for {
		pids, hostOf = h.RankPIDs()
		if len(pids) == n {
			return pids, hostOf
		}
		if time.Now().After(end) {
			h.t.Fatalf("found the PIDs of %d ranks of %d on the hosts: %v", len(pids), n, pids)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Kill sends SIGKILL to every process of host i until none is left
// (mpirun's daemon there, the ranks, anything they started).
func (h *Hosts) Kill(i int) {
	h.t.Helper()
	for end := time.Now().Add(10 * time.Second); ; {
		pids := h.PIDs(i)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(end) {
			h.t.Fatalf("host %d: processes %v survive SIGKILL", i, pids)
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// LinkDown cuts host i off the network: its port on the bridge goes down.
func (h *Hosts) LinkDown(i int) {
	h.t.Helper()
	if out, err := exec.Command("ip", "link", "set", h.hosts[i].port, "down").CombinedOutput(); err != nil {
		h.t.Fatalf("ip link set %s down: %v\n%s", h.hosts[i].port, err, out)
	}
}

// LinkUp puts host i back on the network after LinkDown.
func (h *Hosts) LinkUp(i int) {
	h.t.Helper()
	if out, err := exec.Command("ip", "link", "set", h.hosts[i].port, "up").CombinedOutput(); err != nil {
		h.t.Fatalf("ip link set %s up: %v\n%s", h.hosts[i].port, err, out)
	}
}

// Split cuts hosts side off from the other hosts and from mpirun, but
// not from each other: a partition of the network in two. Their ports
// move from the bridge to a second bridge (made on first use), where
// their frames reach each other only; Rejoin moves them back.
func (h *Hosts) Split(side ...int) {
	h.t.Helper()
	if h.split == "" {
		h.split = strings.TrimSuffix(h.bridge, "br") + "bs"
		for _, args := range [][]string{{"link", "add", h.split, "type", "bridge"}, {"link", "set", h.split, "up"}} {
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				h.t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
	}
	for _, i := range side {
		h.setMaster(i, h.split)
	}
}

// Rejoin puts every host back on the bridge after Split.
func (h *Hosts) Rejoin() {
	h.t.Helper()
	for i := range h.hosts {
		h.setMaster(i, h.bridge)
	}
}

// setMaster attaches host i's port to bridge br.
func (h *Hosts) setMaster(i int, br string) {
	h.t.Helper()
	if out, err := exec.Command("ip", "link", "set", h.hosts[i].port, "master", br).CombinedOutput(); err != nil {
		h.t.Fatalf("ip link set %s master %s: %v\n%s", h.hosts[i].port, br, err, out)
	}
}

// Loss drops every frame that host i sends or receives with probability
// rate (0 to 1, in steps of 0.001) from now on (0: none); it leaves the
// delay as it is. The host must have been listed as delayable in NewHosts.
func (h *Hosts) Loss(i int, rate float64) {
	h.t.Helper()
	if h.hosts[i].relay == nil {
		h.t.Fatalf("host %d was not created delayable", i)
	}
	if rate < 0 || rate > 1 {
		h.t.Fatalf("host %d: loss rate %v is not in [0, 1]", i, rate)
	}
	if err := h.hosts[i].relay.setLoss(int(math.Round(rate * 1000))); err != nil {
		h.t.Fatalf("host %d's relay: %v", i, err)
	}
}

// Delay holds every frame that host i sends for d from now on (0: none);
// it leaves the loss rate as it is.
// The host must have been listed as delayable in NewHosts.
func (h *Hosts) Delay(i int, d time.Duration) {
	h.t.Helper()
	if h.hosts[i].relay == nil {
		h.t.Fatalf("host %d was not created delayable", i)
	}
	if err := h.hosts[i].relay.setDelay(d); err != nil {
		h.t.Fatalf("host %d's relay: %v", i, err)
	}
}

// teardown kills every process of the hosts and deletes the namespaces,
// the links and the bridge.
func (h *Hosts) teardown() {
	h.once.Do(func() {
		for i, hs := range h.hosts {
			for range 100 {
				pids := h.PIDs(i)
				if len(pids) == 0 {
					break
				}
				for _, pid := range pids {
					syscall.Kill(pid, syscall.SIGKILL)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if hs.relay != nil {
				hs.relay.close()
			}
			exec.Command("ip", "netns", "del", hs.name).Run()
			for _, l := range hs.links {
				exec.Command("ip", "link", "del", l).Run()
			}
		}
		exec.Command("ip", "link", "del", h.bridge).Run()
		if h.split != "" {
			exec.Command("ip", "link", "del", h.split).Run()
		}
	})
}
