package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vigil-hpc/vigil/node"
	"github.com/vigil-hpc/vigil/ranks"
	"github.com/vigil-hpc/vigil/transport"
)

// agreeFlags drive `vigil agent -agree-loop N`: after start-up the agent
// runs N agreements back to back (Node.Agree, BitOR of agreeContrib) and
// logs every decision to <dir>/rank<r>.log, one line each, written as it
// returns (a SIGKILLed agent leaves every decision it made):
//
//	k <seq> <value hex> <dead ranks, comma-separated, or -> <unacked 0|1> <ns>
//	done <count>
//	error <seq> <message>
//
// The stress test (era_e2e_test.go) checks the logs of all ranks against
// each other.
type agreeFlags struct {
	count   int
	dir     string
	timeout time.Duration
	pause   time.Duration
}

func (a *agreeFlags) register(fs *flag.FlagSet) {
	settingVar(fs, "agree-loop", &a.count)
	settingVar(fs, "agree-log", &a.dir)
	settingVar(fs, "agree-timeout", &a.timeout)
	settingVar(fs, "agree-pause", &a.pause)
}

// agreeContrib is rank r's contribution to agreement k: 8 pseudo-random
// bytes (splitmix64), so that a checker can recompute every contribution.
func agreeContrib(r ranks.Rank, k uint64) []byte {
	x := uint64(r)*0x9e3779b97f4a7c15 ^ (k+1)*0xbf58476d1ce4e5b9
	x ^= x >> 31
	x *= 0x94d049bb133111eb
	x ^= x >> 29
	return binary.LittleEndian.AppendUint64(nil, x)
}

// validate checks the flags; its errors are usageErrors.
func (a *agreeFlags) validate() error {
	switch {
	case a.count < 0:
		return usageErrorf("-agree-loop %d: want ≥ 0", a.count)
	case a.pause < 0:
		return usageErrorf("-agree-pause %v: want ≥ 0", a.pause)
	case a.timeout <= 0:
		return usageErrorf("-agree-timeout %v: want > 0", a.timeout)
	}
	return nil
}

// start runs the loop in the background if -agree-loop was given (the
// flags checked by validate).
func (a *agreeFlags) start(nd *node.Node, logger *slog.Logger) error {
	if a.count == 0 {
		return nil
	}
	var out *os.File
	if a.dir != "" {
		var err error
		out, err = os.OpenFile(filepath.Join(a.dir, fmt.Sprintf("rank%d.log", nd.Rank())), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return fmt.Errorf("-agree-log: %w", err)
		}
	}
	logf := func(format string, args ...any) {
		if out != nil {
			fmt.Fprintf(out, format, args...) // unbuffered: survives SIGKILL
		}
	}
	go func() {
		if out != nil {
			defer out.Close()
		}
		for k := 1; k <= a.count; k++ {
			ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
			t0 := time.Now()
			ag, err := nd.Agree(ctx, node.OpOR, agreeContrib(nd.Rank(), uint64(k)))
			cancel()
			if errors.Is(err, transport.ErrClosed) {
				return // the agent is stopping
			}
			if err != nil {
				logger.Error("agreement failed", "seq", k, "err", err)
				logf("error %d %s\n", k, strings.ReplaceAll(err.Error(), "\n", " "))
				return
			}
			dead := "-"
			if len(ag.Dead) > 0 {
				dead = strings.Trim(strings.Join(strings.Fields(fmt.Sprint(ag.Dead)), ","), "[]")
			}
			unacked := 0
			if ag.Unacked {
				unacked = 1
			}
			logf("k %d %x %s %d %d\n", ag.ID.Seq, ag.Value, dead, unacked, time.Since(t0).Nanoseconds())
			if a.pause > 0 {
				time.Sleep(a.pause)
			}
		}
		logf("done %d\n", a.count)
	}()
	return nil
}
