package bench

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vigil-hpc/vigil/internal/mono"
	"github.com/vigil-hpc/vigil/internal/wire"
	"github.com/vigil-hpc/vigil/lab/hostile"
	"github.com/vigil-hpc/vigil/launch"
)

// HostileConfig configures the hostile-input checks of the heartbeat path
// (issue #30): a UDP flood at every UDP port of one agent, and the replay
// of a killed rank's captured heartbeats to its new observer.
type HostileConfig struct {
	// VigilBin is the product's vigil executable (its agents).
	VigilBin string
	// N agents, heartbeat period H, time-out Delta; Heartbeat is passed
	// as -heartbeat (shm or udp).
	N         int
	H, Delta  time.Duration
	Heartbeat string
	// Flood is how long each port is flooded; Runs is how many flood runs.
	// With Controls, each flood run is followed by a control run: the same
	// agents for as long, not flooded, to tell the flood's effect from
	// the machine's.
	Flood    time.Duration
	Runs     int
	Controls bool
	// Burners adds that many CPU burners during the floods (0: none).
	Burners int
	// Spoof makes the floods forge their source: agent 0's address and
	// port, the emitter agent 1 watches (a raw socket: CAP_NET_RAW), at
	// most SpoofRate datagrams a second (0: as fast as one sender can).
	Spoof     bool
	SpoofRate float64
	// SpoofCopy makes the forged datagrams copies of a heartbeat of agent
	// 0 to agent 1, captured on the loopback device, with a wrong tag:
	// what an attacker who sees the job's frames sends.
	SpoofCopy bool
	// Log receives progress lines, and AgentLog the agents' stderr (nil:
	// none).
	Log, AgentLog io.Writer
}

func (c *HostileConfig) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, format, args...)
	}
}

// FloodRow is one flood run against one agent.
type FloodRow struct {
	Run     int
	Control bool     // not flooded
	Spoof   bool     // from the watched emitter's address (HostileConfig.Spoof)
	Ports   []uint16 // the agent's UDP ports, each flooded for Flood
	// Sent datagrams, and the rate one sender reached.
	Sent uint64
	Rate float64
	// Reports counts "dead" lines of every agent (a live rank reported).
	Reports int
	// KernelDrops and Rejected are the flooded agent's metrics after the
	// flood: datagrams the kernel dropped at its heartbeat sockets, and
	// frames refused by reason; Gone, that its metrics could not be read
	// (it had exited).
	KernelDrops float64
	Rejected    map[string]float64
	Gone        bool
}

// OK reports whether the run passed: no report, and for a flood the
// drops counted.
func (r FloodRow) OK() bool {
	return r.Reports == 0 && !r.Gone && (r.Control || r.KernelDrops > 0 || sumRejected(r.Rejected) > 0)
}

func sumRejected(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

// agentArgs is the agents' command line.
func (c *HostileConfig) agentArgs() []string {
	args := []string{c.VigilBin, "agent", "-h", c.H.String(), "-delta", c.Delta.String(),
		"-grace", (time.Second + c.Delta).String(), "-metrics-addr", "127.0.0.1:0"}
	if c.Heartbeat != "" {
		args = append(args, "-heartbeat", c.Heartbeat)
	}
	return args
}

// HostileFlood floods every UDP port of agent 1 (the observer of rank 0)
// from one sender for cfg.Flood each, cfg.Runs times, with datagrams of
// three kinds: random bytes, frames of another job, and heartbeats of this
// job (its ID read where any user of the host reads it, the shared-memory
// socket's name, or the agent's environment) with a forged tag, each of
// which costs the observer a MAC.
func HostileFlood(ctx context.Context, cfg HostileConfig) ([]FloodRow, error) {
	var rows []FloodRow
	for run := range cfg.Runs {
		for _, control := range []bool{false, true} {
			if control && !cfg.Controls {
				continue
			}
			if ctx.Err() != nil {
				return rows, ctx.Err()
			}
			row, err := hostileFloodRun(ctx, cfg, run, control)
			if err != nil {
				return rows, err
			}
			cfg.logf("flood run %d (control %v): ports %v, %d datagrams at %.0f/s, %d reports, %.0f kernel drops, rejected %v, agent gone %v\n",
				run, control, row.Ports, row.Sent, row.Rate, row.Reports, row.KernelDrops, row.Rejected, row.Gone)
			rows = append(rows, row)
		}
	}
	return rows, nil
}

func hostileFloodRun(ctx context.Context, cfg HostileConfig, run int, control bool) (FloodRow, error) {
	row := FloodRow{Run: run, Control: control, Spoof: cfg.Spoof}
	a, err := startJob(cfg.N, cfg.agentArgs(), launch.Options{Stderr: cfg.AgentLog})
	if err != nil {
		return row, err
	}
	defer a.job.Stop(5 * time.Second)
	time.Sleep(time.Second + 3*cfg.Delta) // past the start-up grace
	const target = 1
	pid := a.Pids()[target]
	if row.Ports, err = udpPorts(pid); err != nil || len(row.Ports) == 0 {
		return row, fmt.Errorf("hostile: agent %d's UDP ports: %v (%d found)", target, err, len(row.Ports))
	}
	job, err := agentJobID(pid)
	if err != nil {
		return row, err
	}
	junk := hostile.Junk(job, cfg.N, 192)
	if cfg.Spoof && cfg.SpoofCopy {
		if junk, err = copiedHeartbeat(a); err != nil {
			return row, err
		}
	}
	var burners *Burners
	if cfg.Burners > 0 {
		if burners, err = StartBurners(cfg.Burners); err != nil {
			return row, err
		}
	}
	var elapsed time.Duration
	for _, port := range row.Ports {
		if control {
			sleepCtx(ctx, cfg.Flood)
			continue
		}
		fctx, cancel := context.WithTimeout(ctx, cfg.Flood)
		dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), port)
		var sent uint64
		var d time.Duration
		if cfg.Spoof {
			var src netip.AddrPort
			if src, err = netip.ParseAddrPort(a.Ready()[0].Addr); err == nil {
				sent, d, err = hostile.SpoofFlood(fctx, src, dst, junk, cfg.SpoofRate)
			}
		} else {
			sent, d, err = hostile.Flood(fctx, dst, junk)
		}
		cancel()
		if err != nil {
			if burners != nil {
				burners.Stop()
			}
			return row, err
		}
		row.Sent += sent
		elapsed += d
	}
	if burners != nil {
		burners.Stop()
	}
	if elapsed > 0 {
		row.Rate = float64(row.Sent) / elapsed.Seconds()
	}
	time.Sleep(3 * cfg.Delta) // a suspicion the flood caused would be out by now
	m, err := scrape(a.Ready()[target].Metrics)
	row.Gone = err != nil
	row.KernelDrops = m["vigil_heartbeat_datagrams_kernel_dropped_total"]
	row.Rejected = map[string]float64{}
	for k, v := range m {
		if r, ok := strings.CutPrefix(k, `vigil_frames_rejected_total{reason="`); ok {
			row.Rejected[strings.TrimSuffix(r, `"}`)] = v
		}
	}
	rep := a.Stop()
	row.Reports = rep.Suspicions
	return row, nil
}

// copiedHeartbeat captures agent 0's datagrams on the loopback device and
// returns 64 copies of its first heartbeat to agent 1 with a wrong tag.
func copiedHeartbeat(a *AgentJob) ([][]byte, error) {
	src, err := netip.ParseAddrPort(a.Ready()[0].Addr)
	if err != nil {
		return nil, err
	}
	capt, err := hostile.StartCapture("lo", src)
	if err != nil {
		return nil, err
	}
	time.Sleep(300 * time.Millisecond)
	for _, b := range capt.Stop() {
		if len(b) == wire.HeartbeatFrameSize && b[3] == byte(wire.Heartbeat) && binary.LittleEndian.Uint32(b[wire.HeaderSize:]) == 1 {
			b[len(b)-1] ^= 1
			out := make([][]byte, 64)
			for i := range out {
				out[i] = b
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("hostile: no heartbeat of agent 0 to agent 1 captured in 300 ms (is it on shared memory?)")
}

// ReplayRow is one kill of a rank whose heartbeats were captured.
type ReplayRow struct {
	Run    int
	Replay bool // the captured heartbeats were replayed after the kill
	// Captured datagrams of the victim (to its observer), and replayed
	// ones.
	Captured, Replayed int
	// Detected is how long after the kill rank 2 reported rank 0 (0: not
	// within 2 s + 4δ).
	Detected time.Duration
	// Rejected is the observer's rejected frames by reason after the run.
	Rejected map[string]float64
	// False counts reports of live ranks.
	False int
}

// OK reports whether the death was reported, within limit with the
// replay, and no live rank was.
func (r ReplayRow) OK(limit time.Duration) bool {
	return r.Detected > 0 && r.False == 0 && (!r.Replay || r.Detected <= limit)
}

// replayLimit is how late a death may be reported with the replay: three
// check periods after the latest report without it in the same session
// (the runs alternate). The replayed datagrams are not the frames the
// heartbeat thread expects, so they go to Go to be rejected, and the check
// that follows them waits for that: on a loaded 2-core host the replay
// runs reported 7–13 ms (about one check) after the runs without it. The
// limit tells that cost from a death hidden for as long as the replay
// lasts (its capture's 500 ms), whatever the load adds to δ + one check.
func replayLimit(rows []ReplayRow, check time.Duration) time.Duration {
	var base time.Duration
	for _, r := range rows {
		if !r.Replay {
			base = max(base, r.Detected)
		}
	}
	return base + 3*check
}

// HostileReplay captures (on the loopback device) the heartbeats of rank
// 0 to its observer, rank 1, then kills both at once: rank 2, rank 1's
// observer, reports rank 1 and becomes the observer of rank 0, whose
// heartbeats it never received (its word for rank 0 is 0). In the runs
// with Replay, the captured heartbeats are replayed to rank 2 in order at
// their pace, from rank 0's own address and port (free once it died: no
// privilege needed), until rank 2 reports rank 0: without the heartbeats'
// binding to their receiver, they would move its word and hide rank 0's
// death for as long as the replay lasts (the capture's 500 ms). Runs alternate with and without the replay.
// Block mending is off (-mend-probe 0): its probes would learn rank 0's
// death without its heartbeats; -partition continue: the kills take half
// of a job of four, which the survivors must not take for a partition. It
// needs CAP_NET_RAW (the capture) and
// heartbeats by datagram (cfg.Heartbeat udp).
func HostileReplay(ctx context.Context, cfg HostileConfig) ([]ReplayRow, error) {
	var rows []ReplayRow
	for run := range 2 * cfg.Runs {
		if ctx.Err() != nil {
			return rows, ctx.Err()
		}
		row, err := hostileReplayRun(cfg, run, run%2 == 0)
		if err != nil {
			return rows, err
		}
		cfg.logf("replay run %d (replay %v): %d captured, %d replayed, reported after %v, %d false, rejected %v\n",
			run, row.Replay, row.Captured, row.Replayed, row.Detected, row.False, row.Rejected)
		rows = append(rows, row)
	}
	return rows, nil
}

// checkPeriod is the agents' default check period: max(δ/8, h).
func (c *HostileConfig) checkPeriod() time.Duration { return max(c.Delta/8, c.H) }

func hostileReplayRun(cfg HostileConfig, run int, replay bool) (ReplayRow, error) {
	row := ReplayRow{Run: run, Replay: replay}
	a, err := startJob(cfg.N, append(cfg.agentArgs(), "-mend-probe=0", "-partition=continue"), launch.Options{Stderr: cfg.AgentLog})
	if err != nil {
		return row, err
	}
	defer a.job.Stop(5 * time.Second)
	ready := a.Ready()
	victim, err := netip.ParseAddrPort(ready[0].Addr)
	if err != nil {
		return row, fmt.Errorf("hostile: rank 0's address %q: %w", ready[0].Addr, err)
	}
	observer, err := netip.ParseAddrPort(ready[2].Addr)
	if err != nil {
		return row, err
	}
	time.Sleep(time.Second + 3*cfg.Delta)
	capt, err := hostile.StartCapture("lo", victim)
	if err != nil {
		return row, err
	}
	time.Sleep(500 * time.Millisecond) // rank 0's heartbeats to rank 1
	captured := capt.Stop()
	row.Captured = len(captured)
	killed := mono.Now()
	for _, r := range []uint32{1, 0} {
		if err := a.job.Signal(r, syscall.SIGKILL); err != nil {
			return row, err
		}
	}
	<-a.Exited()[0] // its port is free
	stopReplay := make(chan int)
	done := make(chan struct{})
	if replay && len(captured) > 0 {
		go func() {
			stopReplay <- replayFrom(victim, observer, captured, cfg.H, done)
		}()
	}
	reported := waitLine(a, 2*time.Second+4*cfg.Delta, func(l lineView) bool { return l.ev == "dead" && l.dead == 0 && l.rank == 2 })
	close(done)
	if replay && len(captured) > 0 {
		row.Replayed = <-stopReplay
	}
	if m, err := scrape(ready[2].Metrics); err == nil {
		row.Rejected = map[string]float64{}
		for k, v := range m {
			if r, ok := strings.CutPrefix(k, `vigil_frames_rejected_total{reason="`); ok {
				row.Rejected[strings.TrimSuffix(r, `"}`)] = v
			}
		}
	}
	a.job.Stop(5 * time.Second)
	<-a.done
	for _, l := range a.log {
		if l.Ev == "dead" && !l.Left && l.Dead != 0 && l.Dead != 1 {
			row.False++
		}
		if reported && l.Ev == "dead" && l.Dead == 0 && l.Rank == 2 && row.Detected == 0 {
			row.Detected = time.Duration(l.DeliveredMono - killed)
		}
	}
	return row, nil
}

// lineView is what waitLine's predicate sees of an agent line.
type lineView struct {
	ev         string
	rank, dead uint32
}

// waitLine waits up to d for an agent line satisfying ok.
func waitLine(a *AgentJob, d time.Duration, ok func(lineView) bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for _, l := range a.Lines() {
			if ok(lineView{l.Ev, l.Rank, l.Dead}) {
				return true
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

// udpPorts returns the local ports of process pid's UDP sockets, from
// /proc: its socket descriptors' inodes, looked up in /proc/pid/net/udp
// and udp6.
func udpPorts(pid int) ([]uint16, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return nil, err
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(l, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
		}
	}
	var ports []uint16
	for _, f := range []string{"udp", "udp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 10 || !inodes[fs[9]] {
				continue
			}
			_, hexPort, _ := strings.Cut(fs[1], ":")
			p, err := strconv.ParseUint(hexPort, 16, 16)
			if err == nil && !slices.Contains(ports, uint16(p)) {
				ports = append(ports, uint16(p))
			}
		}
	}
	return ports, nil
}

// agentJobID reads the job ID from an agent's environment (what any user
// of the host reads in /proc/net/unix while the job shares memory).
func agentJobID(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return 0, err
	}
	for _, kv := range strings.Split(string(b), "\x00") {
		if v, ok := strings.CutPrefix(kv, "VIGIL_JOBID="); ok {
			return strconv.ParseUint(v, 16, 64)
		}
	}
	return 0, fmt.Errorf("hostile: no VIGIL_JOBID in agent %d's environment", pid)
}

// replayFrom sends the captured datagrams to dst from src's address and
// port, in their order, one every period (as their emitter did: each one
// would move a word that has not seen it), until done or the last; it
// returns how many it sent.
func replayFrom(src, dst netip.AddrPort, dgrams [][]byte, period time.Duration, done <-chan struct{}) int {
	c, err := net.DialUDP("udp4", net.UDPAddrFromAddrPort(src), net.UDPAddrFromAddrPort(dst))
	if err != nil {
		return 0
	}
	defer c.Close()
	tick := time.NewTicker(period)
	defer tick.Stop()
	n := 0
	for _, b := range dgrams {
		if _, err := c.Write(b); err == nil {
			n++
		}
		select {
		case <-done:
			return n
		case <-tick.C:
		}
	}
	return n
}

// scrape reads one Prometheus text page into name{labels} → value.
func scrape(addr string) (map[string]float64, error) {
	if addr == "" {
		return nil, fmt.Errorf("hostile: no metrics address")
	}
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m, sc.Err()
}

// HostileTable prints the checks' results and returns whether every run
// passed.
func HostileTable(p func(string, ...any), cfg HostileConfig, floods []FloodRow, replays []ReplayRow) bool {
	ok := true
	if len(floods) > 0 {
		from := "its own address"
		if cfg.Spoof {
			from = "the forged address of agent 0, the emitter agent 1 watches"
		}
		p("UDP flood, one sender from %s, %v per port of agent 1 of %d (-heartbeat %s, h=%v δ=%v, %d CPU burners):\n\n", from, cfg.Flood, cfg.N, cfg.Heartbeat, cfg.H, cfg.Delta, cfg.Burners)
		p("| run | flood | ports | datagrams | rate (/s) | reports | kernel drops | rejected | pass |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range floods {
			p("| %d | %v | %v | %d | %.0f | %d | %.0f | %.0f | %v |\n", r.Run, !r.Control, r.Ports, r.Sent, r.Rate, r.Reports, r.KernelDrops, sumRejected(r.Rejected), r.OK())
			ok = ok && (r.Control || r.OK())
		}
		p("\n")
	}
	if len(replays) > 0 {
		limit := replayLimit(replays, cfg.checkPeriod())
		p("Replay of a killed rank's captured heartbeats to its new observer (-heartbeat %s, h=%v δ=%v, no block mending; "+
			"the victim and its observer killed at once; limit with the replay: the latest report without it + one check = %v):\n\n",
			cfg.Heartbeat, cfg.H, cfg.Delta, limit)
		p("| run | replay | captured | replayed | reported after | false reports | wrong_receiver | old_heartbeat | pass |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range replays {
			p("| %d | %v | %d | %d | %v | %d | %.0f | %.0f | %v |\n", r.Run, r.Replay, r.Captured, r.Replayed, r.Detected.Round(100*time.Microsecond),
				r.False, r.Rejected[wire.ReasonWrongReceiver], r.Rejected[wire.ReasonOldHeartbeat], r.OK(limit))
			ok = ok && r.OK(limit)
		}
		p("\n")
	}
	return ok
}
