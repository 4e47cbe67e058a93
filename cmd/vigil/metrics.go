package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/vigil-hpc/vigil/internal/limit"
	"github.com/vigil-hpc/vigil/launch"
	"github.com/vigil-hpc/vigil/node"
)

// metricsSource is what the endpoint reads at each scrape: the node's
// counters and the labels of vigil_agent_info.
type metricsSource struct {
	stats func() node.Stats
	info  [][2]string // label name, value
	// refused, if set, counts the endpoint's connections closed for its
	// cap (serveMetrics sets it).
	refused func() uint64
}

// metricsServer serves the Prometheus text exposition format (version
// 0.0.4) on /metrics. It reads the counters only when scraped: nothing
// runs per heartbeat.
type metricsServer struct {
	srv *http.Server
	ln  net.Listener
}

// The metrics endpoint's limits: anyone who can reach its port can
// connect, so connections are capped and time out.
const (
	// metricsMaxConns is the most connections open at once; beyond it a new
	// one is closed at once.
	metricsMaxConns = 32
	// metricsHeaderTimeout bounds the wait for a request's headers (a
	// connection that sends nothing is closed after it).
	metricsHeaderTimeout = 2 * time.Second
	// metricsIdleTimeout closes a keep-alive connection idle this long.
	metricsIdleTimeout = 5 * time.Second
	// metricsWriteTimeout bounds the time to answer one request.
	metricsWriteTimeout = 5 * time.Second
)

// metricsListenAddr is where -metrics-addr listens: an address without a
// host (":9464") on loopback only; it reports whether the address is a
// wildcard (every interface).
func metricsListenAddr(addr string) (string, bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, false
	}
	if host == "" {
		return net.JoinHostPort("127.0.0.1", port), false
	}
	ip := net.ParseIP(host)
	return addr, ip != nil && ip.IsUnspecified()
}

// serveMetrics listens on addr (host:port; port 0 picks a free one; no
// host: loopback) and serves src in the background, with at most
// metricsMaxConns connections, each timing out, and its errors logged at
// most once a second.
func serveMetrics(addr string, src metricsSource, logger *slog.Logger) (*metricsServer, error) {
	bind, all := metricsListenAddr(addr)
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, fmt.Errorf("-metrics-addr %q: %w", addr, err)
	}
	if all {
		logger.Warn("metrics endpoint listens on every interface: anyone who can reach this host can read the job's counters (give a host, such as 127.0.0.1:9464, to restrict it)",
			"addr", ln.Addr().String())
	}
	capped := limit.Cap(ln, metricsMaxConns)
	src.refused = capped.Refused
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		writeMetrics(w, src)
	})
	logs := limit.NewLog(logger, time.Second)
	m := &metricsServer{ln: capped, srv: &http.Server{Handler: mux,
		ReadHeaderTimeout: metricsHeaderTimeout, ReadTimeout: metricsHeaderTimeout, IdleTimeout: metricsIdleTimeout,
		WriteTimeout: metricsWriteTimeout, MaxHeaderBytes: 8 << 10,
		ErrorLog: log.New(logs.Writer("metrics endpoint", slog.LevelWarn), "", 0)}}
	go func() {
		if err := m.srv.Serve(capped); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("metrics endpoint stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return m, nil
}

// Addr is the address the endpoint listens on.
func (m *metricsServer) Addr() string { return m.ln.Addr().String() }

// Close stops the endpoint.
func (m *metricsServer) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	m.srv.Shutdown(ctx)
}

// writeMetrics writes one scrape of src in the text exposition format.
func writeMetrics(out io.Writer, src metricsSource) error {
	st := src.stats()
	w := bufio.NewWriter(out)
	family := func(name, typ, help string) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	sample := func(name, labels string, v float64) {
		fmt.Fprintf(w, "%s%s %s\n", name, labels, strconv.FormatFloat(v, 'g', -1, 64))
	}
	one := func(name, typ, help string, v float64) {
		family(name, typ, help)
		sample(name, "", v)
	}
	counter := func(name, help string, v uint64) { one(name, "counter", help, float64(v)) }
	gauge := func(name, help string, v float64) { one(name, "gauge", help, v) }
	flag := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}

	family("vigil_agent_info", "gauge", "Constant 1, labelled with this process's rank, job size and transport.")
	labels := "{"
	for i, l := range src.info {
		if i > 0 {
			labels += ","
		}
		labels += l[0] + "=" + strconv.Quote(l[1])
	}
	sample("vigil_agent_info", labels+"}", 1)

	em, tr := st.Emitter, st.Transport
	counter("vigil_heartbeats_sent_total", "Heartbeats sent to this rank's observer.", tr.HeartbeatsSent)
	counter("vigil_heartbeats_dropped_total", "Heartbeats the send side gave up on (full socket buffer, unreachable observer).", tr.HeartbeatsDropped)
	counter("vigil_heartbeats_received_total", "Heartbeat datagrams received and stored (heartbeats written straight into shared memory or by RDMA are not counted).", tr.HeartbeatsRecv)
	counter("vigil_heartbeat_datagrams_kernel_dropped_total", "Datagrams the kernel dropped at this rank's heartbeat sockets, their receive buffers full (a flood at the port).", tr.KernelDropped)
	counter("vigil_lane_probes_total", "PROBEs sent to the watched emitter, silent while its heartbeat socket dropped datagrams (a flood from its forged address), for a sign of life over its message connection.", st.LaneProbes)
	counter("vigil_heartbeat_deadlines_missed_total", "Periods the heartbeat thread woke up more than one period late.", em.Missed)
	gauge("vigil_heartbeat_max_lateness_seconds", "Worst wake-up lateness of the heartbeat thread since the start.", float64(em.MaxLateNs)/1e9)
	counter("vigil_observer_checks_total", "Checks of the emitter's heartbeat word run on the heartbeat thread.", em.Checks)
	gauge("vigil_heartbeat_realtime", "1 when the heartbeat thread runs SCHED_FIFO.", flag(em.RealTime))
	gauge("vigil_heartbeat_native", "1 when the heartbeat thread runs in C, outside the Go runtime.", flag(em.Native))
	gauge("vigil_process_realtime", "1 when every thread of the process runs real-time (-realtime-process).", flag(st.ProcessRT))

	counter("vigil_failures_reported_total", "Crashes this rank's observer detected.", st.Reported)
	counter("vigil_deaths_learned_total", "Crashed ranks this rank learned of, each once (its own detections included).", st.DeathsLearned)
	counter("vigil_departures_learned_total", "Ranks this rank learned had left cleanly.", st.Departures)

	counter("vigil_messages_sent_total", "Protocol messages sent (one per destination).", tr.MsgsSent)
	counter("vigil_messages_received_total", "Protocol messages received.", tr.MsgsRecv)
	counter("vigil_messages_dropped_total", "Messages the send side gave up on (full queue, dead or unreachable peer).", tr.MsgsDropped)
	counter("vigil_message_bytes_sent_total", "Bytes of protocol messages sent.", tr.BytesSent)
	counter("vigil_message_bytes_received_total", "Bytes of protocol messages received.", tr.BytesRecv)
	family("vigil_frames_rejected_total", "counter", "Frames refused on receipt, by reason (only reasons seen so far).")
	reasons := make([]string, 0, len(tr.Rejected))
	for r := range tr.Rejected {
		reasons = append(reasons, r)
	}
	slices.Sort(reasons)
	for _, r := range reasons {
		sample("vigil_frames_rejected_total", "{reason="+strconv.Quote(r)+"}", float64(tr.Rejected[r]))
	}
	kinds := func(name, help string, v func(node.KindStats) uint64) {
		family(name, "counter", help)
		for k, ks := range st.ByKind {
			sample(name, "{kind="+strconv.Quote(node.MsgKinds[k])+"}", float64(v(ks)))
		}
	}
	kinds("vigil_protocol_messages_sent_total", "Protocol messages handed to the transport, per kind (one per destination).",
		func(k node.KindStats) uint64 { return k.Sent })
	kinds("vigil_protocol_messages_received_total", "Protocol messages received and decoded, per kind.",
		func(k node.KindStats) uint64 { return k.Recv })
	kinds("vigil_protocol_message_bytes_sent_total", "Bytes of the protocol messages sent, per kind (the message's encoding, without the transport's framing).",
		func(k node.KindStats) uint64 { return k.BytesSent })
	kinds("vigil_protocol_message_bytes_received_total", "Bytes of the protocol messages received, per kind (the message's encoding, without the transport's framing).",
		func(k node.KindStats) uint64 { return k.BytesRecv })
	counter("vigil_bad_messages_total", "Authenticated messages that failed to decode or made no sense.", st.BadMessages)

	counter("vigil_broadcasts_started_total", "Broadcasts this rank started.", st.BcastsStarted)
	counter("vigil_broadcast_messages_forwarded_total", "Broadcast messages this rank sent on behalf of others.", st.BcastsForwarded)
	counter("vigil_sync_messages_sent_total", "Dead-list repair requests and answers sent.", st.SyncsSent)
	counter("vigil_event_loop_wakeups_total", "Wake-ups of the detector's event loop.", st.LoopWakes)

	counter("vigil_agreements_decided_total", "Agreement decisions this rank reached.", st.AgreementsDecided)
	family("vigil_agreement_duration_seconds", "summary", "Time from an Agree call to its decision, for the calls that returned one.")
	sample("vigil_agreement_duration_seconds_sum", "", float64(st.AgreeLatencyNs)/1e9)
	sample("vigil_agreement_duration_seconds_count", "", float64(st.AgreeReturned))
	gauge("vigil_agreement_max_duration_seconds", "Longest time from an Agree call to its decision.", float64(st.AgreeMaxLatencyNs)/1e9)
	if src.refused != nil {
		counter("vigil_metrics_connections_refused_total", "Connections to this endpoint closed at once because 32 were open.", src.refused())
	}
	return w.Flush()
}

// byKind is st's message counters for a stats line: the kinds seen so
// far (nil before any message).
func byKind(st node.Stats) map[string]launch.KindCount {
	var out map[string]launch.KindCount
	for k, ks := range st.ByKind {
		if ks == (node.KindStats{}) {
			continue
		}
		if out == nil {
			out = map[string]launch.KindCount{}
		}
		out[node.MsgKinds[k]] = launch.KindCount{Sent: ks.Sent, Recv: ks.Recv, BytesSent: ks.BytesSent, BytesRecv: ks.BytesRecv}
	}
	return out
}

// checkMetricsAddr checks -metrics-addr's form (empty: no endpoint).
func checkMetricsAddr(addr string) error {
	if addr == "" {
		return nil
	}
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return usageErrorf("-metrics-addr %q: want host:port, such as 127.0.0.1:9464, or :0 (a free port on loopback)", addr)
	}
	return nil
}
