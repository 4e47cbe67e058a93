package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
)

// logFlags are the stderr log settings of run, agent, demo and daemon:
// -log-level, -log-json, and -v (the same as -log-level info).
type logFlags struct {
	level   string
	json    bool
	verbose bool
}

func (l *logFlags) register(fs *flag.FlagSet) {
	settingVar(fs, "log-level", &l.level)
	settingVar(fs, "log-json", &l.json)
	settingVar(fs, "v", &l.verbose)
}

// slogLevel returns the level the flags ask for.
func (l *logFlags) slogLevel() (slog.Level, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(l.level)); err != nil {
		return 0, usageErrorf("-log-level %q: want debug, info, warn or error", l.level)
	}
	if l.verbose && lv > slog.LevelInfo {
		lv = slog.LevelInfo
	}
	return lv, nil
}

func (l *logFlags) validate() error {
	_, err := l.slogLevel()
	return err
}

// logger returns a logger writing to w as the flags ask.
func (l *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	lv, err := l.slogLevel()
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: lv}
	if l.json {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// args renders the flags back for child agents.
func (l *logFlags) args() []string {
	a := []string{"-log-level", l.level}
	if l.json {
		a = append(a, "-log-json")
	}
	if l.verbose {
		a = append(a, "-v")
	}
	return a
}

// usageError is a bad invocation: an unknown flag, a bad flag value or
// values that do not fit together. vigil exits 2 on it, 1 on other errors.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usageErrorf formats a usageError.
func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// asUsage marks a non-nil err as a usageError (flag.ErrHelp passes
// unchanged).
func asUsage(err error) error {
	if err == nil || err == flag.ErrHelp {
		return err
	}
	return usageError{err}
}
