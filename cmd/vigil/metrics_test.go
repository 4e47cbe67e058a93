package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vigil-hpc/vigil/heartbeat"
	"github.com/vigil-hpc/vigil/launch"
	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/transport"
)

// parseMetrics reads the Prometheus text format: samples keyed by name
// with labels as written ("name" or `name{a="b"}`). It fails on a sample
// whose family has no # TYPE line before it, on a bad value, or on a
// sample written twice.
func parseMetrics(t *testing.T, text string) map[string]float64 {
	t.Helper()
	typed := map[string]string{}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			typed[f[2]] = f[3]
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("metrics line %q: no value", line)
		}
		key, val := line[:i], line[i+1:]
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		name, _, _ := strings.Cut(key, "{")
		fam := name
		if typ, ok := typed[strings.TrimSuffix(strings.TrimSuffix(name, "_sum"), "_count")]; ok && typ == "summary" {
			fam = strings.TrimSuffix(strings.TrimSuffix(name, "_sum"), "_count")
		}
		if typed[fam] == "" {
			t.Fatalf("metrics line %q: no # TYPE for %s", line, fam)
		}
		if _, dup := out[key]; dup {
			t.Fatalf("metrics: %s twice", key)
		}
		out[key] = v
	}
	return out
}

// scrape fetches and parses one endpoint.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	return parseMetrics(t, scrapeText(t, addr))
}

// scrapeText fetches one endpoint's page.
func scrapeText(t *testing.T, addr string) string {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scraping %s: %v", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scraping %s: %s, %v", addr, resp.Status, err)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("scraping %s: Content-Type %q", addr, ct)
	}
	return string(body)
}

// TestMetricsTextFormat: one scrape of given counters, every family typed,
// the rejections by reason, the agreement summary in seconds.
func TestMetricsTextFormat(t *testing.T) {
	st := node.Stats{
		Transport:     transport.Stats{HeartbeatsSent: 7, MsgsSent: 3, Rejected: map[string]uint64{"bad_tag": 2, "stale": 1}},
		Emitter:       heartbeat.EmitterStats{Missed: 4, MaxLateNs: 1_500_000, Checks: 9, Native: true},
		DeathsLearned: 1, Reported: 1, Departures: 2, AgreementsDecided: 5,
		AgreeReturned: 4, AgreeLatencyNs: 2_000_000, AgreeMaxLatencyNs: 1_000_000, LaneProbes: 6,
	}
	st.ByKind[2] = node.KindStats{Sent: 3, Recv: 2, BytesSent: 90, BytesRecv: 61}
	var b bytes.Buffer
	if err := writeMetrics(&b, metricsSource{stats: func() node.Stats { return st }, info: [][2]string{{"rank", "0"}, {"size", "4"}}}); err != nil {
		t.Fatal(err)
	}
	m := parseMetrics(t, b.String())
	for k, want := range map[string]float64{
		`vigil_agent_info{rank="0",size="4"}`:                       1,
		"vigil_heartbeats_sent_total":                               7,
		"vigil_heartbeat_deadlines_missed_total":                    4,
		"vigil_lane_probes_total":                                   6,
		"vigil_heartbeat_max_lateness_seconds":                      0.0015,
		"vigil_observer_checks_total":                               9,
		"vigil_heartbeat_native":                                    1,
		"vigil_heartbeat_realtime":                                  0,
		"vigil_deaths_learned_total":                                1,
		"vigil_failures_reported_total":                             1,
		"vigil_departures_learned_total":                            2,
		"vigil_messages_sent_total":                                 3,
		`vigil_frames_rejected_total{reason="bad_tag"}`:             2,
		`vigil_frames_rejected_total{reason="stale"}`:               1,
		"vigil_agreements_decided_total":                            5,
		"vigil_agreement_duration_seconds_count":                    4,
		"vigil_agreement_duration_seconds_sum":                      0.002,
		"vigil_agreement_max_duration_seconds":                      0.001,
		"vigil_broadcast_messages_forwarded_total":                  0,
		"vigil_message_bytes_received_total":                        0,
		`vigil_protocol_messages_sent_total{kind="bcast"}`:          3,
		`vigil_protocol_messages_received_total{kind="bcast"}`:      2,
		`vigil_protocol_message_bytes_sent_total{kind="bcast"}`:     90,
		`vigil_protocol_message_bytes_received_total{kind="bcast"}`: 61,
		`vigil_protocol_messages_sent_total{kind="agree"}`:          0,
		`vigil_protocol_messages_received_total{kind="alive"}`:      0,
	} {
		if got, ok := m[k]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, want)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", b.String())
	}
}

// TestE2EMetrics: agents started with -metrics-addr 127.0.0.1:0 print
// their endpoint in the ready line; scraped while they run, the heartbeat
// and check counters grow, agreements are counted (decisions, durations,
// agreement messages each way with their bytes), a stray frame is counted
// by reason, and after a kill -9 every survivor has learned one death,
// which exactly one of them (the observer) reported, and broadcast
// messages were counted.
func TestE2EMetrics(t *testing.T) {
	const n, agreements = 4, 3
	argv := []string{vigilBin, "agent", "-h", "10ms", "-delta", "200ms", "-metrics-addr", "127.0.0.1:0",
		"-agree-loop", strconv.Itoa(agreements)}
	job, err := launch.Start(n, argv, launch.Options{Stderr: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	addrs, rankAddrs := map[uint32]string{}, map[uint32]string{} // metrics endpoints, message ports
	var early []launch.Line
	timeout := time.After(60 * time.Second)
	for len(addrs) < n {
		select {
		case l, ok := <-job.Lines:
			if !ok {
				t.Fatalf("agents exited before all were ready")
			}
			if l.Ev == "ready" {
				addrs[l.Rank] = l.Metrics
				rankAddrs[l.Rank] = l.Addr
			}
			early = append(early, l)
		case <-timeout:
			job.Stop(time.Second)
			t.Fatalf("%d of %d agents ready", len(addrs), n)
		}
	}
	j := followJob(t, job, early)
	for r, a := range addrs {
		if !strings.HasPrefix(a, "127.0.0.1:") || strings.HasSuffix(a, ":0") {
			t.Fatalf("rank %d: ready line's metrics address %q", r, a)
		}
	}

	first := scrape(t, addrs[1])
	if first[`vigil_agent_info{rank="1",size="4",transport="tcp"}`] != 1 {
		t.Fatalf("no vigil_agent_info for rank 1: %v", first)
	}
	time.Sleep(300 * time.Millisecond)
	second := scrape(t, addrs[1])
	for _, k := range []string{"vigil_heartbeats_sent_total", "vigil_observer_checks_total"} {
		if !(second[k] > first[k]) {
			t.Errorf("%s: %v then %v 300 ms later, want it growing", k, first[k], second[k])
		}
	}
	if second["vigil_deaths_learned_total"] != 0 {
		t.Fatalf("deaths learned %v before any kill", second["vigil_deaths_learned_total"])
	}

	// The agreements of -agree-loop, counted by every rank.
	await := func(what string, cond func(r uint32, m map[string]float64) bool, ranks ...uint32) map[uint32]map[string]float64 {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			got := map[uint32]map[string]float64{}
			ok := true
			for _, r := range ranks {
				got[r] = scrape(t, addrs[r])
				ok = ok && cond(r, got[r])
			}
			if ok {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("after 30 s, not %s: %v", what, got)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	await("every agreement counted", func(_ uint32, m map[string]float64) bool {
		return m["vigil_agreement_duration_seconds_count"] == agreements && m["vigil_agreements_decided_total"] >= agreements &&
			m["vigil_agreement_duration_seconds_sum"] > 0 && m["vigil_agreement_max_duration_seconds"] > 0 &&
			m[`vigil_protocol_messages_sent_total{kind="agree"}`] > 0 && m[`vigil_protocol_messages_received_total{kind="agree"}`] > 0 &&
			m[`vigil_protocol_message_bytes_sent_total{kind="agree"}`] > 0 && m[`vigil_protocol_message_bytes_received_total{kind="agree"}`] > 0
	}, 0, 1, 2, 3)

	// A frame that is not Vigil's, on a connection to rank 1's message
	// port: refused and counted by reason.
	conn, err := net.DialTimeout("tcp", rankAddrs[1], 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte(strings.Repeat("GET / HTTP/1.0\r\n", 8))) // longer than a frame header
	await("the stray frame refused", func(_ uint32, m map[string]float64) bool {
		return m[`vigil_frames_rejected_total{reason="bad_magic"}`] == 1
	}, 1)
	conn.Close()

	j.kill(2)
	got := await("one death learned by every survivor", func(_ uint32, m map[string]float64) bool {
		return m["vigil_deaths_learned_total"] == 1
	}, 0, 1, 3)
	reported := 0.0
	for r, m := range got {
		reported += m["vigil_failures_reported_total"]
		if m["vigil_messages_received_total"] == 0 || m["vigil_departures_learned_total"] != 0 {
			t.Errorf("rank %d: messages received %v, departures %v", r, m["vigil_messages_received_total"], m["vigil_departures_learned_total"])
		}
	}
	if reported != 1 {
		t.Errorf("failures reported by the survivors: %v in all, want 1 (rank 2's observer)", reported)
	}
	var bcasts float64
	for r, m := range got {
		k := func(name string) float64 { return m[`vigil_protocol_`+name+`{kind="bcast"}`] }
		if k("messages_sent_total")+k("messages_received_total") == 0 {
			t.Errorf("rank %d: no broadcast message after the kill", r)
		}
		bcasts += k("messages_received_total")
	}
	if bcasts == 0 {
		t.Errorf("no survivor received a broadcast of the kill")
	}
	j.checkAccuracy(map[uint32]bool{2: true})
	t.Logf("rank 1's endpoint after the kill:\n%s", scrapeText(t, addrs[1]))

	// Every line the agents printed carries the schema version.
	j.mu.Lock()
	for _, l := range j.lines {
		if l.V != launch.SchemaVersion {
			t.Errorf("line %+v: v %d, want %d", l, l.V, launch.SchemaVersion)
		}
	}
	j.mu.Unlock()
}

// TestE2ELogJSON: with -log-json and -log-level debug, the agents' stderr
// is log/slog JSON records, one per line.
func TestE2ELogJSON(t *testing.T) {
	cmd := exec.Command(vigilBin, "run", "-n", "2", "-t", "1s", "-log-json", "-log-level", "debug")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if out, err := cmd.Output(); err != nil {
		t.Fatalf("vigil run: %v\n%s\n%s", err, out, stderr.Bytes())
	}
	lines := 0
	for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if l == "" {
			continue
		}
		var rec struct{ Time, Level, Msg string }
		if err := json.Unmarshal([]byte(l), &rec); err != nil || rec.Level == "" || rec.Msg == "" {
			t.Errorf("stderr line %q: not a slog JSON record (%v)", l, err)
		}
		lines++
	}
	if lines == 0 {
		t.Errorf("no log line at debug level")
	}
	t.Logf("%d JSON log lines", lines)
}

// TestE2EDaemonMetrics: `vigil daemon -metrics-addr 127.0.0.1:0` prints its
// endpoint in the ready line, which carries the schema version, and serves
// the same families, labelled with its node.
func TestE2EDaemonMetrics(t *testing.T) {
	key, err := exec.Command(vigilBin, "keygen").Output()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(vigilBin, "daemon", "-node", "0", "-peers", "127.0.0.1:0", "-metrics-addr", "127.0.0.1:0")
	cmd.Env = append(cmd.Environ(), "VIGIL_DAEMON_KEY="+strings.TrimSpace(string(key)))
	out := startPiped(t, cmd)
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var ready struct {
		V           int
		Ev, Metrics string
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() || json.Unmarshal(sc.Bytes(), &ready) != nil || ready.Ev != "ready" || ready.Metrics == "" ||
		ready.V != daemonSchemaVersion {
		t.Fatalf("daemon's first line %q, want a ready line with metrics and \"v\":%d", sc.Text(), daemonSchemaVersion)
	}
	m := scrape(t, ready.Metrics)
	if m[`vigil_agent_info{node="0",nodes="1",transport="tcp"}`] != 1 {
		t.Fatalf("no vigil_agent_info for node 0: %v", m)
	}
	if _, ok := m["vigil_deaths_learned_total"]; !ok {
		t.Fatalf("no vigil_deaths_learned_total: %v", m)
	}
}
