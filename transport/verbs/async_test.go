package verbs

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	ibv "github.com/vigil-hpc/vigil/verbs"
)

// A QP error event on the emitter's heartbeat link breaks the link as a
// failed write would: heartbeats continue over UD and a new link comes up;
// the event is counted, nothing is suspected (the transport has no say in
// suspicion).
func TestAsyncQPErrorBreaksLink(t *testing.T) {
	ts, _ := cluster(t, 2)
	seq := linkUp(t, ts[0], 1)
	l := ts[0].links[1].Load()
	ts[0].do(func(st *state) { st.handleAsync(ibv.AsyncEvent{Type: ibv.EventQPFatal, QPNum: l.qp.Num()}) })
	st := ts[0].VerbsStats()
	if st.RCErrors != 1 || st.AsyncEvents != 1 {
		t.Fatalf("after a QP fatal event: %+v, want 1 RC error and 1 async event", st)
	}
	waitFor(t, 10*time.Second, "a new link after the QP error", func() bool {
		seq++
		if err := ts[0].SendHeartbeat(1, seq); err != nil {
			t.Fatal(err)
		}
		return ts[0].VerbsStats().LinksUp >= 2
	})
	if got := ts[1].Slots().Load(0); got == 0 {
		t.Fatal("the observer's slot never advanced")
	}
	if ts[0].VerbsStats().UDHeartbeats == 0 {
		t.Fatal("no UD heartbeat while the link was down")
	}
}

// The transport reads the device's port events itself: a port going down
// and up is counted, and heartbeats reach the observer again afterwards.
func TestAsyncPortEventsConsumed(t *testing.T) {
	nd := os.Getenv("VIGIL_RXE_NETDEV")
	if os.Getenv("VIGIL_RXE_GUEST") != "1" || nd == "" {
		needDevice(t)
		t.Skip("flaps a netdev: runs only in the rxe guest")
	}
	ts, _ := cluster(t, 2)
	seq := linkUp(t, ts[0], 1)
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("/usr/sbin/ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	ip("link", "set", nd, "down")
	waitFor(t, 5*time.Second, "PortErrors counted by both transports", func() bool {
		return ts[0].VerbsStats().PortErrors >= 1 && ts[1].VerbsStats().PortErrors >= 1
	})
	ip("link", "set", nd, "up")
	waitFor(t, 10*time.Second, "port 1 ACTIVE again", func() bool {
		a, err := ts[0].ctx.QueryPort(1)
		return err == nil && a.State == ibv.PortActive
	})
	before := ts[1].Slots().Load(0)
	waitFor(t, 20*time.Second, "heartbeats arriving again after the port came back", func() bool {
		seq++
		ts[0].SendHeartbeat(1, seq) // errors while the port comes back are the transport's to handle
		return ts[1].Slots().Load(0) > before
	})
	t.Logf("after the flap: %+v", ts[0].VerbsStats())
}

// With type 2 memory windows (rxe has them) each emitter's link can write
// its own slot word and nothing else: emitters 0 and 1 both heartbeat
// observer 2; link 0 aimed at word 1 with its rkey is refused by the
// device, and word 1 keeps emitter 1's value.
func TestSlotWindows(t *testing.T) {
	ts, _ := cluster(t, 3)
	if !ts[2].windows {
		if os.Getenv("VIGIL_RXE_GUEST") == "1" {
			t.Fatal("no memory windows on rxe")
		}
		t.Skip("device without type 2 memory windows")
	}
	linkUp(t, ts[0], 2)
	seq1 := linkUp(t, ts[1], 2)
	l0, l1 := ts[0].links[2].Load(), ts[1].links[2].Load()
	if l0.remote.RKey == l1.remote.RKey || l0.remote.RKey == ts[2].slots.RKey() {
		t.Fatalf("rkeys: link 0 %#x, link 1 %#x, slot array %#x: want three different", l0.remote.RKey, l1.remote.RKey, ts[2].slots.RKey())
	}
	waitFor(t, 5*time.Second, "emitter 1's word", func() bool { return ts[2].Slots().Load(1) == seq1 })
	err := l0.w.Write(ibv.RemoteAddr{Addr: l0.remote.Addr + 8, RKey: l0.remote.RKey}, 1<<40) // word 1
	if err == nil {
		err = l0.w.Sync(5 * time.Second)
	}
	var wce *ibv.WCError
	if !errors.As(err, &wce) || wce.Status != ibv.WCRemAccessErr {
		t.Fatalf("emitter 0 writing emitter 1's word: %v, want a remote access error", err)
	}
	if got := ts[2].Slots().Load(1); got != seq1 {
		t.Fatalf("word 1 = %d, want emitter 1's %d", got, seq1)
	}
}

// The transport says at Open which slot protection it runs with: a
// warning without memory windows (Config.NoWindows here), an info line
// with them.
func TestModeLogged(t *testing.T) {
	needDevice(t)
	for _, noWindows := range []bool{true, false} {
		var buf bytes.Buffer
		cfg := testConfig(0, 2, 77, slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
		cfg.NoWindows = noWindows
		tr, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		windows := tr.windows
		if err := tr.Close(); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		switch {
		case noWindows && (windows || !strings.Contains(out, "level=WARN") || !strings.Contains(out, "memory_windows=false") || !strings.Contains(out, "why=Config.NoWindows")):
			t.Errorf("NoWindows: windows=%v, log:\n%s", windows, out)
		case !noWindows && windows && (!strings.Contains(out, "level=INFO") || !strings.Contains(out, "memory_windows=true")):
			t.Errorf("with windows: log:\n%s", out)
		case !noWindows && !windows && !strings.Contains(out, "no type 2 memory windows"):
			t.Errorf("device without windows: log:\n%s", out)
		}
	}
}

// Without Config.Device, Config.Netdev picks the RDMA device carrying that
// interface (rdmamap); an interface without one is refused, naming it.
func TestOpenByNetdev(t *testing.T) {
	needDevice(t)
	nd := os.Getenv("VIGIL_RXE_NETDEV")
	if nd == "" {
		if os.Getenv("VIGIL_RXE_GUEST") == "1" {
			t.Fatal("VIGIL_RXE_NETDEV not set in the guest")
		}
		t.Skip("VIGIL_RXE_NETDEV not set")
	}
	cfg := testConfig(0, 2, 78, nil)
	cfg.Device, cfg.Netdev = "", nd
	tr, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dev := tr.Device()
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if want := os.Getenv("VIGIL_RXE_DEV"); want != "" && dev != want {
		t.Errorf("netdev %s opened %s, want %s", nd, dev, want)
	}
	cfg.Netdev = "lo"
	if tr, err := Open(cfg); err == nil {
		tr.Close()
		t.Error("netdev lo (no RDMA device) was accepted")
	} else if !strings.Contains(err.Error(), `Config.Netdev "lo"`) {
		t.Errorf("error %v does not name Config.Netdev", err)
	}
}
