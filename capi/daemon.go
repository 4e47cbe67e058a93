package main

/*
#cgo CFLAGS: -I${SRCDIR}/../csrc
#define VIGIL_NO_PROTOTYPES
#include <stdlib.h>
#include "vigil_daemon.h"
*/
import "C"

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/vigil-hpc/vigil/daemon"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/settings"
)

// Daemon mode (csrc/vigil_daemon.h): the process attaches to its node's
// `vigil daemon`, the stand-alone detector, instead of running one.

const modeDaemon = C.VIGIL_MODE_DAEMON

// daemonSocket resolves the socket path of vigil_init_daemon.
func daemonSocket(path string, rank uint32) (string, error) {
	if path == "" {
		path = os.Getenv(daemon.EnvSocket)
	}
	if path == "" {
		return "", fmt.Errorf("no daemon socket: pass a path or set %s", daemon.EnvSocket)
	}
	if strings.Contains(path, "{node}") {
		ppn, err := strconv.Atoi(os.Getenv(settings.DaemonPPN.Env))
		if err != nil || ppn < 1 {
			return "", fmt.Errorf("%s=%q holds {node}: %s=%q must give the processes per node", daemon.EnvSocket, path,
				settings.DaemonPPN.Env, os.Getenv(settings.DaemonPPN.Env))
		}
		path = strings.ReplaceAll(path, "{node}", strconv.Itoa(int(rank)/ppn))
	}
	return path, nil
}

// vigil_init_daemon attaches to the node's daemon (vigil_daemon.h).
//
//export vigil_init_daemon
func vigil_init_daemon(socketPath *C.char, rank C.uint32_t) C.int {
	mu.Lock()
	defer mu.Unlock()
	if cur.Load() != nil {
		return failf(eState, "vigil_init_daemon: already initialized (call vigil_finalize first)")
	}
	inst := &instance{rank: uint32(rank), mode: modeDaemon}
	var err error
	if inst.log, err = newLogger(); err != nil {
		return fail(eInvalid, err)
	}
	path := ""
	if socketPath != nil {
		path = C.GoString(socketPath)
	}
	if path, err = daemonSocket(path, inst.rank); err != nil {
		return fail(eInvalid, fmt.Errorf("vigil_init_daemon: %w", err))
	}
	inst.evl = newEventLog() // before the first report comes
	cl, err := daemon.AttachFunc(path, ranks.Rank(rank), inst.daemonEvent)
	if err != nil {
		return fail(eBootstrap, fmt.Errorf("vigil_init_daemon: %w", err))
	}
	inst.dc = cl
	inst.size = cl.Layout().Procs()
	inst.bs = &staticBootstrap{staticIdentity: staticIdentity{rank: inst.rank, size: inst.size}}
	if rc := finishInit(inst, settings.CNames); rc != vOK {
		cl.Close(false)
		return rc
	}
	return vOK
}

// daemonEvent records a report of the node's daemon in the event log, on
// the daemon.Client's reading goroutine.
func (inst *instance) daemonEvent(ev daemon.Event) {
	if ev.Kind != daemon.KindProc {
		return // a node's failure comes with one event per process
	}
	kind := eventFailed
	if ev.Cause == daemon.Left.String() {
		kind = eventLeft
	}
	inst.evl.add(event{kind: kind, rank: uint32(ev.Rank), detector: uint32(ev.Detector),
		detectedUnix: ev.DetectedUnix, deliveredMono: ev.DeliveredMono})
}

func (inst *instance) closing() bool {
	select {
	case <-inst.quit:
		return true
	default:
		return false
	}
}

// leaveDaemon is vigil_leave in daemon mode: say goodbye and detach.
func (inst *instance) leaveDaemon() C.int {
	if err := inst.dc.Close(true); err != nil {
		return fail(eTransport, fmt.Errorf("vigil_leave: telling the daemon: %w", err))
	}
	return vOK
}
